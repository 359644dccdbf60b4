// test_vgpurun.c: vgpurun's command building: options and machine facts in,
// the mpirun/srun line and its environment out.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "status.h"
#include "vgpurun_plan.h"

// Builds the plan for `vgpurun ARGS...` on a machine described by facts and
// returns its one-line form ("" and the message in err on refusal).
static char line_[4096], err_[1024];
static struct vgpurun_plan plan_;

static const char *plan_for_(const struct vgpurun_facts *facts, int argc, char **argv)
{
    struct vgpurun_options opts;
    line_[0] = err_[0] = '\0';
    vgpurun_plan_free(&plan_);
    if (vgpurun_parse_args(argc, argv, &opts, err_, sizeof err_) != 0)
        return line_;
    if (vgpurun_plan_build(&opts, facts, &plan_, err_, sizeof err_) == 0)
        vgpurun_format_command(&plan_, line_, sizeof line_);
    return line_;
}
#define PLAN(facts, ...)                                                       \
    plan_for_(facts, sizeof((char *[]){__VA_ARGS__}) / sizeof(char *), (char *[]){__VA_ARGS__})

static const struct vgpurun_facts user_2cores = {.cores = 2, .host = "box", .have_rsh_agent = 1};
static const struct vgpurun_facts root_2cores = {.is_root = 1, .cores = 2, .host = "box",
                                                 .have_rsh_agent = 1};

static int teardown_(void **state)
{
    (void)state;
    vgpurun_plan_free(&plan_);
    return 0;
}

static void test_root_and_oversubscribe_only_when_needed(void **state)
{
    (void)state;
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "-np", "2", "--", "prog", "c.ini"),
                        "mpirun -np 2 -q --map-by slot --bind-to numa:overload-allowed prog c.ini");
    assert_string_equal(PLAN(&root_2cores, "vgpurun", "-np", "4", "--", "prog"),
                        "mpirun -np 4 -q --allow-run-as-root --oversubscribe --map-by slot "
                        "--bind-to none prog");
    struct vgpurun_facts allowed = root_2cores;
    allowed.root_allowed_by_env = 1;
    assert_string_equal(PLAN(&allowed, "vgpurun", "-n", "1", "prog"),
                        "mpirun -np 1 -q --map-by slot --bind-to numa:overload-allowed prog");
}

// Open MPI 4's mpirun needs an ssh or rsh on the PATH even on one host: where
// there is none, vgpurun names a harmless one for mpirun (not the ranks);
// the user's own setting wins, and across hosts the real one is needed.
static void test_no_ssh_on_one_host(void **state)
{
    (void)state;
    struct vgpurun_facts facts = user_2cores;
    facts.have_rsh_agent = 0;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "prog"),
                        "OMPI_MCA_plm_rsh_agent=false mpirun -np 2 -q --map-by slot "
                        "--bind-to numa:overload-allowed prog");
    const char *env[] = {"OMPI_MCA_plm_rsh_agent", NULL};
    facts.env_names = env;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "prog"),
                        "mpirun -np 2 -q --map-by slot --bind-to numa:overload-allowed prog");
    facts.env_names = NULL;
    facts.host_count = 2;
    facts.slot_count = 4;
    assert_null(strstr(PLAN(&facts, "vgpurun", "-np", "4", "-H", "a:2,b:2", "prog"), "rsh_agent"));
}

// More ranks than a hostfile's slots: --oversubscribe, said without -v
// (the user wrote the slots down); more than the cores is a quiet note.
static void test_oversubscribing_slots_is_said(void **state)
{
    (void)state;
    struct vgpurun_facts facts = user_2cores;
    facts.host_count = 1;
    facts.slot_count = 2;
    PLAN(&facts, "vgpurun", "-np", "4", "-H", "box:2", "prog");
    int loud = 0;
    for (int i = 0; i < plan_.notec; i++)
        if (plan_.loud[i]) {
            loud++;
            assert_string_equal(plan_.notes[i],
                                "--oversubscribe: 4 ranks on 2 slots of the -H list (and --bind-to none)");
        }
    assert_int_equal(loud, 1);
    PLAN(&user_2cores, "vgpurun", "-np", "4", "prog");
    for (int i = 0; i < plan_.notec; i++)
        assert_false(plan_.loud[i]);
}

static void test_device_settings_become_exported_variables(void **state)
{
    (void)state;
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "-np", "2", "--ranks-per-gpu", "2",
                             "--mem-per-rank", "1.5G", "--backend", "ring", "--", "prog"),
                        "VGPU_RANKS_PER_DEVICE=2 VGPU_MEMORY_LIMIT=1.5G VGPU_BACKEND=ring "
                        "mpirun -np 2 -q --map-by slot "
                        "--bind-to numa:overload-allowed -x VGPU_RANKS_PER_DEVICE "
                        "-x VGPU_MEMORY_LIMIT -x VGPU_BACKEND prog");
    // Variables already set that the ranks need travel too, each once; others do not.
    const char *env[] = {"HOME", "VGPU_BACKEND", "NCCL_DEBUG", "OMPI_MCA_x", NULL};
    struct vgpurun_facts facts = user_2cores;
    facts.env_names = env;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "--backend", "mpi", "prog"),
                        "VGPU_BACKEND=mpi mpirun -np 2 -q --map-by slot "
                        "--bind-to numa:overload-allowed "
                        "-x VGPU_BACKEND -x NCCL_DEBUG prog");
}

static void test_program_options_are_the_programs(void **state)
{
    (void)state;
    // -n and --verbose after the program name belong to the program.
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "-np", "2", "prog", "-n", "7", "--verbose",
                             "it's"),
                        "mpirun -np 2 -q --map-by slot "
                        "--bind-to numa:overload-allowed prog -n 7 --verbose 'it'\\''s'");
}

static void test_hosts_decide_slots(void **state)
{
    (void)state;
    int hosts, slots;
    assert_int_equal(vgpurun_count_hostfile("# two nodes\nnode1 slots=2\n\n  node2  slots=4 # gpu\n",
                                            &hosts, &slots, err_, sizeof err_),
                     0);
    assert_int_equal(hosts, 2);
    assert_int_equal(slots, 6);
    assert_int_equal(vgpurun_count_hostfile("a slots=2\nb\n", &hosts, &slots, err_, sizeof err_), 0);
    assert_int_equal(slots, -1);
    assert_int_equal(vgpurun_count_hostfile("a slots=x\n", &hosts, &slots, err_, sizeof err_), VGPU_ECONFIG);
    assert_non_null(strstr(err_, "line 1"));
    assert_int_equal(vgpurun_count_hostfile("# nothing\n", &hosts, &slots, err_, sizeof err_), VGPU_ECONFIG);
    assert_int_equal(vgpurun_count_host_list("a:2,b,c:4", &hosts, &slots, err_, sizeof err_), 0);
    assert_int_equal(hosts, 3);
    assert_int_equal(slots, 7);
    assert_int_equal(vgpurun_count_host_list("a:0", &hosts, &slots, err_, sizeof err_), VGPU_ECONFIG);

    // 8 ranks on 2 hosts x 4 slots fit although this host has 2 cores.
    struct vgpurun_facts facts = root_2cores;
    facts.host_count = 2;
    facts.slot_count = 8;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "8", "-H", "a:4,b:4", "--", "prog"),
                        "mpirun -np 8 -H a:4,b:4 --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed prog");
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "9", "-H", "a:4,b:4", "--", "prog"),
                        "mpirun -np 9 -H a:4,b:4 --allow-run-as-root --oversubscribe --map-by slot "
                        "--bind-to none prog");
    // Without -np, all slots.
    assert_string_equal(PLAN(&facts, "vgpurun", "--hostfile", "hf", "--", "prog"),
                        "mpirun -np 8 --hostfile hf --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed prog");
    // Unknown slots: mpirun decides, no --oversubscribe guessed.
    facts.slot_count = -1;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "9", "--hostfile", "hf", "--", "prog"),
                        "mpirun -np 9 --hostfile hf --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed prog");
}

static void test_slurm_uses_srun_pmix(void **state)
{
    (void)state;
    struct vgpurun_facts facts = root_2cores;
    facts.in_slurm = 1;
    facts.slurm_ntasks = 4;
    assert_string_equal(PLAN(&facts, "vgpurun", "--mem-per-rank", "64M", "--", "prog", "c.ini"),
                        "VGPU_MEMORY_LIMIT=64M srun --mpi=pmix --export=ALL -n 4 prog c.ini");
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "--launcher", "mpirun", "prog"),
                        "mpirun -np 2 -q --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed prog");
    assert_string_equal(PLAN(&facts, "vgpurun", "--hostfile", "hf", "prog"), "");
    assert_non_null(strstr(err_, "hosts come from Slurm"));
}

static void test_mps_needs_a_gpu_and_a_cap(void **state)
{
    (void)state;
    assert_string_equal(PLAN(&root_2cores, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G",
                             "prog"),
                        "");
    assert_non_null(strstr(err_, "--mps needs an NVIDIA GPU, and box has none"));

    struct vgpurun_facts gpu = root_2cores;
    gpu.gpu_count = 2;
    gpu.have_mps_control = 1;
    // No --mem-per-rank and the GPUs' sizes not known: MPS without a limit.
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "prog"),
                        "mpirun -np 2 -q --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed "
                        "-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY prog");
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G", "prog"),
                        "VGPU_MEMORY_LIMIT=1G CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2560MB,1=2560MB "
                        "mpirun -np 2 -q --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed "
                        "-x VGPU_MEMORY_LIMIT -x CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "
                        "-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY prog");
    gpu.host_count = 2;
    gpu.slot_count = 4;
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "4", "-H", "a:2,b:2", "--mps", "--mem-per-rank",
                             "1G", "prog"),
                        "");
    assert_non_null(strstr(err_, "this host only"));
    // Finding 2: an MPS server renumbers the GPUs it is given: the daemon and
    // the ranks get the same GPUs by UUID.
    gpu.host_count = 0;
    static const char *const uuids[] = {"GPU-aa", "GPU-bb", "GPU-cc", "GPU-dd"};
    gpu.cuda_visible = "2,3";
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G", "prog"), "");
    assert_non_null(strstr(err_, "GPU 2's UUID is not known (nvidia-smi did not say)"));
    gpu.gpu_uuids = uuids;
    gpu.gpu_uuid_count = 4;
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G", "prog"),
                        "VGPU_MEMORY_LIMIT=1G CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2560MB,1=2560MB "
                        "CUDA_VISIBLE_DEVICES=GPU-cc,GPU-dd CUDA_DEVICE_ORDER=PCI_BUS_ID "
                        "mpirun -np 2 -q --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed "
                        "-x VGPU_MEMORY_LIMIT -x CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "
                        "-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY "
                        "-x CUDA_VISIBLE_DEVICES -x CUDA_DEVICE_ORDER prog");
    gpu.cuda_visible = "GPU-dd,1";
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G", "prog"),
                        "VGPU_MEMORY_LIMIT=1G CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2560MB,1=2560MB "
                        "CUDA_VISIBLE_DEVICES=GPU-dd,GPU-bb CUDA_DEVICE_ORDER=PCI_BUS_ID "
                        "mpirun -np 2 -q --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed "
                        "-x VGPU_MEMORY_LIMIT -x CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "
                        "-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY "
                        "-x CUDA_VISIBLE_DEVICES -x CUDA_DEVICE_ORDER prog");
    gpu.cuda_visible = "7";
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G", "prog"), "");
    assert_non_null(strstr(err_, "GPU 7's UUID is not known (no such GPU)"));
    gpu.cuda_visible = NULL;
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G",
                             "--sm-share", "50", "prog"),
                        "VGPU_MEMORY_LIMIT=1G CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2560MB,1=2560MB "
                        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 "
                        "mpirun -np 2 -q --allow-run-as-root --map-by slot "
                        "--bind-to numa:overload-allowed "
                        "-x VGPU_MEMORY_LIMIT -x CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "
                        "-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY "
                        "-x CUDA_MPS_ACTIVE_THREAD_PERCENTAGE prog");
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--sm-share", "50", "prog"), "");
    assert_non_null(strstr(err_, "which is not started here (one rank a GPU): add --mps"));
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--sm-share", "0", "prog"), "");
    assert_non_null(strstr(err_, "1 to 100"));
    gpu.have_mps_control = 0;
    assert_string_equal(PLAN(&gpu, "vgpurun", "-np", "2", "--mps", "--mem-per-rank", "1G", "prog"), "");
    assert_non_null(strstr(err_, "nvidia-cuda-mps-control"));
}

// ---- MPS without asking: vgpurun_mps_decide ----

static struct vgpurun_mps_choice mps_;

// The decision for `vgpurun ARGS...` (np from -np) on facts; its rc.
static int decide_for_(const struct vgpurun_facts *facts, int argc, char **argv)
{
    struct vgpurun_options opts;
    err_[0] = '\0';
    memset(&mps_, 0, sizeof mps_);
    int rc = vgpurun_parse_args(argc, argv, &opts, err_, sizeof err_);
    return rc < 0 ? rc : vgpurun_mps_decide(&opts, facts, opts.np, &mps_, err_, sizeof err_);
}
#define DECIDE(facts, ...)                                                     \
    decide_for_(facts, sizeof((char *[]){__VA_ARGS__}) / sizeof(char *), (char *[]){__VA_ARGS__})

#define GIB (1ull << 30)
static const int default_modes_[4] = {0, 0, 0, 0}; // GPU_MODE_DEFAULT
static const uint64_t gpus_80g_[4] = {80 * GIB, 80 * GIB, 80 * GIB, 80 * GIB};

// A host of n 80 GiB GPUs in DEFAULT mode with nvidia-cuda-mps-control.
static struct vgpurun_facts gpu_host_(int n)
{
    struct vgpurun_facts f = user_2cores;
    f.gpu_count = n;
    f.gpu_modes = default_modes_;
    f.gpu_bytes = gpus_80g_;
    f.have_mps_control = 1;
    return f;
}

static void test_mps_starts_where_ranks_share_a_gpu(void **state)
{
    (void)state;
    struct vgpurun_facts f = gpu_host_(1);
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "4", "prog"), 0);
    assert_true(mps_.start && mps_.loud);
    assert_string_equal(mps_.why, "MPS: started for the job (4 ranks share GPU 0)");
    assert_int_equal(mps_.shared_ranks, 4);
    assert_int_equal(mps_.limit_bytes, 20 * GIB); // an equal share of 80 GiB
    // The plan: the limit and the daemon's directories for every rank.
    assert_string_equal(PLAN(&f, "vgpurun", "-np", "4", "prog"),
                        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480MB mpirun -np 4 -q "
                        "--oversubscribe --map-by slot --bind-to none "
                        "-x CUDA_MPS_PINNED_DEVICE_MEM_LIMIT -x CUDA_MPS_PIPE_DIRECTORY "
                        "-x CUDA_MPS_LOG_DIRECTORY prog");
    assert_true(plan_.mps);
    // --mem-per-rank: that cap plus the context's and NCCL's room, as --mps.
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "4", "--mem-per-rank", "8G", "prog"), 0);
    assert_int_equal(mps_.limit_bytes, 8 * GIB + (1536ull << 20));
    // 3 ranks on 2 GPUs: two share GPU 0, and the one on GPU 1 gets the same
    // limit (a plain program pinned there sees it as device 0).
    f = gpu_host_(2);
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "3", "prog"), 0);
    assert_string_equal(mps_.why, "MPS: started for the job (2 ranks share GPU 0)");
    assert_int_equal(mps_.limit_bytes, 40 * GIB);
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "8", "--ranks-per-gpu", "4", "prog"), 0);
    assert_string_equal(mps_.why, "MPS: started for the job (8 ranks share GPUs 0,1)");
    // The binding policy's count: VGPU_RANKS_PER_DEVICE from the
    // environment; a rank past the GPUs' room has none (the runtime refuses).
    f = gpu_host_(4);
    f.ranks_per_gpu_env = 2;
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "4", "prog"), 0);
    assert_string_equal(mps_.why, "MPS: started for the job (4 ranks share GPUs 0,1)");
    f = gpu_host_(1);
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "5", "--ranks-per-gpu", "4", "prog"), 0);
    assert_string_equal(mps_.why, "MPS: started for the job (4 ranks share GPU 0)");
    assert_int_equal(mps_.limit_bytes, 20 * GIB);
    // A PROHIBITED GPU is left out: both ranks go to GPU 1.
    static const int prohibited_first[2] = {2, 0}; // GPU_MODE_PROHIBITED, GPU_MODE_DEFAULT
    f = gpu_host_(2);
    f.gpu_modes = prohibited_first;
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "2", "prog"), 0);
    assert_string_equal(mps_.why, "MPS: started for the job (2 ranks share GPU 1)");
    // --dry-run starts nothing: said as what a run would do.
    f = gpu_host_(1);
    PLAN(&f, "vgpurun", "-np", "4", "--dry-run", "prog");
    int said = 0;
    for (int i = 0; i < plan_.notec; i++)
        said |= !strcmp(plan_.notes[i], "MPS: would start for the job (4 ranks share GPU 0)") &&
                plan_.loud[i];
    assert_true(said);
}

static void test_mps_not_started_says_why(void **state)
{
    (void)state;
    struct vgpurun_facts f = gpu_host_(2);
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "2", "prog"), 0);
    assert_false(mps_.start || mps_.loud); // nothing lost: said with -v only
    assert_string_equal(mps_.why, "MPS: not started: one rank a GPU");
    f = gpu_host_(1);
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "4", "--no-mps", "prog"), 0);
    assert_true(!mps_.start && mps_.loud);
    assert_string_equal(mps_.why, "MPS: not started: --no-mps (ranks take turns on the GPU)");
    assert_string_equal(PLAN(&f, "vgpurun", "-np", "4", "--no-mps", "prog"),
                        "mpirun -np 4 -q --oversubscribe --map-by slot --bind-to none prog");
    assert_false(plan_.mps);
    f.mps_server = "CUDA_MPS_PIPE_DIRECTORY=/x";
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "4", "prog"), 0);
    assert_false(mps_.start);
    assert_string_equal(mps_.why,
                        "MPS: not started: an MPS server already runs (CUDA_MPS_PIPE_DIRECTORY=/x)");
    static const int exclusive[1] = {1}; // GPU_MODE_EXCLUSIVE_PROCESS
    f = gpu_host_(1);
    f.gpu_modes = exclusive;
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "2", "prog"), 0);
    assert_false(mps_.start);
    assert_string_equal(mps_.why, "MPS: not started: GPU 0 is in Exclusive_Process mode (one "
                                  "process may use it: --mps starts MPS there, or run one rank a GPU)");
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "2", "--mps", "prog"), 0); // forced: it may
    assert_true(mps_.start);
    assert_string_equal(mps_.why, "MPS: started for the job (--mps; 2 ranks share GPU 0)");
    f = gpu_host_(1);
    f.have_mps_control = 0;
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "2", "prog"), 0);
    assert_false(mps_.start);
    assert_string_equal(mps_.why, "MPS: not started: nvidia-cuda-mps-control not found: ranks "
                                  "take turns (install the CUDA driver's MPS tools)");
    f.gpus_simulated = 1; // simulated GPUs: nothing to install
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "2", "prog"), 0);
    assert_false(mps_.start);
    assert_string_equal(mps_.why, "MPS: not started: the GPUs are simulated and this host has no "
                                  "nvidia-cuda-mps-control (on a GPU host vgpurun would start it)");
    f = gpu_host_(1);
    f.host_count = 2;
    f.slot_count = 8;
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "8", "-H", "a:4,b:4", "prog"), 0);
    assert_true(!mps_.start && mps_.loud);
    assert_string_equal(mps_.why, "MPS: not started: the job spans 2 hosts, and vgpurun starts MPS "
                                  "on its own host only (start it on each node, "
                                  "nvidia-cuda-mps-control -d): ranks sharing a GPU take turns");
    // No GPU here: nothing to decide, nothing said.
    assert_int_equal(DECIDE(&user_2cores, "vgpurun", "-np", "4", "prog"), 0);
    assert_false(mps_.start);
    assert_string_equal(mps_.why, "");
    f = gpu_host_(1);
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "4", "--mps", "--no-mps", "prog"), VGPU_ECONFIG);
    assert_string_equal(err_, "--mps and --no-mps: choose one");
    // --sm-share needs MPS: with it started here it goes along.
    assert_int_equal(DECIDE(&f, "vgpurun", "-np", "4", "--sm-share", "25", "prog"), 0);
    assert_true(mps_.start);
}

static void test_bad_command_lines_say_why(void **state)
{
    (void)state;
    static const struct {
        const char *arg, *value, *says;
    } cases[] = {
        {"-np", "0", "rank count"},          {"-np", "x", "rank count"},
        {"--mem-per-rank", "lots", "512M"},  {"--mem-per-rank", "0", "512M"},
        {"--backend", "gloo", "auto, ring"}, {"--ranks-per-gpu", "-1", "count"},
        {"--launcher", "pbs", "mpirun"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {"vgpurun", (char *)cases[i].arg, (char *)cases[i].value, "prog", NULL};
        assert_string_equal(plan_for_(&user_2cores, 4, argv), "");
        assert_non_null(strstr(err_, cases[i].says));
    }
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "-np", "2"), "");
    assert_non_null(strstr(err_, "no program"));
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "prog"), "");
    assert_non_null(strstr(err_, "-np N"));
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "--hostfile", "f", "-H", "a", "prog"), "");
    assert_non_null(strstr(err_, "not both"));
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "--frobnicate", "prog"), "");
    assert_non_null(strstr(err_, "unknown option"));

    // The status codes are the project's: VGPU_ECONFIG for a bad line, VGPU_OK
    // with opts.help for --help (even with other options or no program).
    struct vgpurun_options opts;
    char *bad[] = {"vgpurun", "-np", "0", "prog", NULL};
    assert_int_equal(vgpurun_parse_args(4, bad, &opts, err_, sizeof err_), VGPU_ECONFIG);
    char *help[] = {"vgpurun", "-np", "2", "--help", NULL};
    assert_int_equal(vgpurun_parse_args(4, help, &opts, err_, sizeof err_), VGPU_OK);
    assert_true(opts.help);
}

static void test_one_host_runs_mpirun_quiet_and_binds_past_its_cores(void **state)
{
    (void)state;
    // The shipped hostfile: one host, 4 slots, on 2 cores.
    struct vgpurun_facts facts = user_2cores;
    facts.host_count = 1;
    facts.slot_count = 4;
    assert_string_equal(PLAN(&facts, "vgpurun", "--hostfile", "localhost", "--", "prog"),
                        "mpirun -np 4 -q --hostfile localhost --map-by slot "
                        "--bind-to numa:overload-allowed prog");
    assert_true(plan_.quiet_mpirun);
    // mpirun's own reports stay with -v, with VGPU_MPIRUN_REPORT=1, and across hosts.
    assert_string_equal(PLAN(&facts, "vgpurun", "-v", "-np", "2", "--", "prog"),
                        "mpirun -np 2 --map-by slot --bind-to numa:overload-allowed prog");
    assert_false(plan_.quiet_mpirun);
    facts.keep_mpirun_reports = 1;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "--", "prog"),
                        "mpirun -np 2 --map-by slot --bind-to numa:overload-allowed prog");
    facts.keep_mpirun_reports = 0;
    facts.host_count = 2;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "-H", "a,b", "--", "prog"),
                        "mpirun -np 2 -H a,b --map-by slot --bind-to numa:overload-allowed prog");
}

static void test_variables_and_launcher_options_pass_through(void **state)
{
    (void)state;
    const char *env[] = {"HOME", NULL};
    struct vgpurun_facts facts = user_2cores;
    facts.env_names = env;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "-x", "FOO=a b", "-x", "HOME", "--",
                             "--mca", "btl", "self,tcp", "--", "prog", "--", "x"),
                        "'FOO=a b' mpirun -np 2 -q --map-by slot --bind-to numa:overload-allowed "
                        "-x FOO -x HOME --mca btl self,tcp prog -- x");
    facts.in_slurm = 1;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "-x", "FOO=1", "--", "--exclusive",
                             "--", "prog"),
                        "FOO=1 srun --mpi=pmix --export=ALL -n 2 --exclusive prog");

    assert_string_equal(PLAN(&user_2cores, "vgpurun", "-np", "2", "-x", "UNSET_HERE", "prog"), "");
    assert_non_null(strstr(err_, "UNSET_HERE is not set here"));
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "-np", "2", "-x", "1X=2", "prog"), "");
    assert_non_null(strstr(err_, "expected NAME or NAME=VALUE"));
    assert_string_equal(PLAN(&user_2cores, "vgpurun", "-np", "2", "--", "--mca", "btl", "tcp"), "");
    assert_non_null(strstr(err_, "second --"));
}

static void test_a_terminal_is_told_to_the_ranks(void **state)
{
    (void)state;
    struct vgpurun_facts facts = user_2cores;
    facts.terminal_columns = 80;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "prog"),
                        "VGPU_TERMINAL=1 COLUMNS=80 mpirun -np 2 -q --map-by slot "
                        "--bind-to numa:overload-allowed -x VGPU_TERMINAL -x COLUMNS prog");
    // The user's own settings win and still travel.
    const char *env[] = {"VGPU_TERMINAL", "COLUMNS", NULL};
    facts.env_names = env;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "prog"),
                        "mpirun -np 2 -q --map-by slot --bind-to numa:overload-allowed "
                        "-x COLUMNS -x VGPU_TERMINAL prog");
}

static void test_version_and_help_run_nothing(void **state)
{
    (void)state;
    struct vgpurun_options opts;
    char *version[] = {"vgpurun", "--version", NULL};
    assert_int_equal(vgpurun_parse_args(2, version, &opts, err_, sizeof err_), VGPU_OK);
    assert_true(opts.version);
    char *help[] = {"vgpurun", "-h", NULL};
    assert_int_equal(vgpurun_parse_args(2, help, &opts, err_, sizeof err_), VGPU_OK);
    assert_true(opts.help);
    assert_false(opts.version);
}

static void test_mps_limit_rounds_up_to_mib(void **state)
{
    (void)state;
    char buf[128];
    assert_string_equal(vgpurun_mps_limit((1ull << 20) + 1, 1, buf, sizeof buf), "0=2MB");
    assert_string_equal(vgpurun_mps_limit(3ull << 30, 3, buf, sizeof buf),
                        "0=3072MB,1=3072MB,2=3072MB");
}

// Any program: the shim goes before it, the rendezvous travels with -x, and
// the user's own MASTER_PORT is left alone.
static void test_any_program_starts_through_the_shim(void **state)
{
    (void)state;
    struct vgpurun_facts facts = user_2cores;
    facts.rank_shim = "/opt/vgpu/vgpurun-rank";
    facts.master_addr = "10.0.0.1";
    facts.master_port = 29517;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "--", "python3", "t.py"),
                        "MASTER_ADDR=10.0.0.1 MASTER_PORT=29517 mpirun -np 2 -q --map-by slot "
                        "--bind-to numa:overload-allowed -x MASTER_ADDR -x MASTER_PORT "
                        "/opt/vgpu/vgpurun-rank python3 t.py");
    const char *env[] = {"MASTER_PORT", NULL};
    facts.env_names = env;
    assert_string_equal(PLAN(&facts, "vgpurun", "-np", "2", "--", "python3", "t.py"),
                        "MASTER_ADDR=10.0.0.1 mpirun -np 2 -q --map-by slot "
                        "--bind-to numa:overload-allowed -x MASTER_ADDR -x MASTER_PORT "
                        "/opt/vgpu/vgpurun-rank python3 t.py");
}

// The rank's identity from the launcher's variables (a table stands in for
// the environment).
static const char *const *table_;
static const char *table_get_(const char *name)
{
    for (int i = 0; table_[i]; i += 2)
        if (!strcmp(table_[i], name))
            return table_[i + 1];
    return NULL;
}

static void test_rank_identity_from_the_launcher(void **state)
{
    (void)state;
    struct vgpurun_rank_id id;
    char err[256];
    const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "8",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "4",
                          NULL};
    table_ = ompi;
    assert_int_equal(vgpurun_rank_identity(table_get_, &id, err, sizeof err), 0);
    assert_int_equal(id.rank, 5);
    assert_int_equal(id.world_size, 8);
    assert_int_equal(id.local_rank, 1);
    assert_int_equal(id.local_size, 4);
    // Slurm: 2 tasks on each of nodes 0-2, 1 on node 3; rank 6 is node 3's.
    const char *slurm[] = {"SLURM_PROCID", "6", "SLURM_NTASKS", "7", "SLURM_LOCALID", "0",
                           "SLURM_NODEID", "3", "SLURM_STEP_TASKS_PER_NODE", "2(x3),1", NULL};
    table_ = slurm;
    assert_int_equal(vgpurun_rank_identity(table_get_, &id, err, sizeof err), 0);
    assert_int_equal(id.rank, 6);
    assert_int_equal(id.local_size, 1);
    assert_int_equal(id.node, 3);
    const char *none[] = {"HOME", "/root", NULL};
    table_ = none;
    assert_int_equal(vgpurun_rank_identity(table_get_, &id, err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "run it through vgpurun"));
    const char *bad[] = {"OMPI_COMM_WORLD_RANK", "4", "OMPI_COMM_WORLD_SIZE", "4",
                         "OMPI_COMM_WORLD_LOCAL_RANK", "0", "OMPI_COMM_WORLD_LOCAL_SIZE", "1",
                         NULL};
    table_ = bad;
    assert_int_equal(vgpurun_rank_identity(table_get_, &id, err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "rank 4 of 4"));
}

static void test_slurm_tasks_per_node(void **state)
{
    (void)state;
    assert_int_equal(vgpurun_slurm_tasks_on_node("4", 0), 4);
    assert_int_equal(vgpurun_slurm_tasks_on_node("4", 1), -1);
    assert_int_equal(vgpurun_slurm_tasks_on_node("2(x3),1", 2), 2);
    assert_int_equal(vgpurun_slurm_tasks_on_node("2(x3),1", 3), 1);
    assert_int_equal(vgpurun_slurm_tasks_on_node("1,3(x2)", 2), 3);
    assert_int_equal(vgpurun_slurm_tasks_on_node("2(3)", 0), -1);
    assert_int_equal(vgpurun_slurm_tasks_on_node("x", 0), -1);
    assert_int_equal(vgpurun_slurm_tasks_on_node(NULL, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_root_and_oversubscribe_only_when_needed, teardown_),
        cmocka_unit_test_teardown(test_no_ssh_on_one_host, teardown_),
        cmocka_unit_test_teardown(test_oversubscribing_slots_is_said, teardown_),
        cmocka_unit_test_teardown(test_device_settings_become_exported_variables, teardown_),
        cmocka_unit_test_teardown(test_program_options_are_the_programs, teardown_),
        cmocka_unit_test_teardown(test_hosts_decide_slots, teardown_),
        cmocka_unit_test_teardown(test_slurm_uses_srun_pmix, teardown_),
        cmocka_unit_test_teardown(test_mps_needs_a_gpu_and_a_cap, teardown_),
        cmocka_unit_test_teardown(test_mps_starts_where_ranks_share_a_gpu, teardown_),
        cmocka_unit_test_teardown(test_mps_not_started_says_why, teardown_),
        cmocka_unit_test_teardown(test_bad_command_lines_say_why, teardown_),
        cmocka_unit_test_teardown(test_mps_limit_rounds_up_to_mib, teardown_),
        cmocka_unit_test_teardown(test_one_host_runs_mpirun_quiet_and_binds_past_its_cores, teardown_),
        cmocka_unit_test_teardown(test_variables_and_launcher_options_pass_through, teardown_),
        cmocka_unit_test_teardown(test_a_terminal_is_told_to_the_ranks, teardown_),
        cmocka_unit_test_teardown(test_version_and_help_run_nothing, teardown_),
        cmocka_unit_test_teardown(test_any_program_starts_through_the_shim, teardown_),
        cmocka_unit_test(test_rank_identity_from_the_launcher),
        cmocka_unit_test(test_slurm_tasks_per_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
