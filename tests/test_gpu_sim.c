// test_gpu_sim.c: the simulated GPU driver's pure parts (gpu_driver.h): the
// topology language, CUDA_VISIBLE_DEVICES as CUDA applies it, and the MPS
// client limit as MPS writes it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gpu_driver.h"
#include "status.h"

#define GiB (1ull << 30)

static struct gpu_sim_gpu gpus_[GPU_MAX];

static struct gpu_sim_host host_;

static int parse_(const char *spec, int *count)
{
    char err[256] = "";
    int rc = gpu_sim_parse(spec, gpus_, GPU_MAX, count, &host_, err, sizeof err);
    if (rc)
        print_message("  %s -> %s\n", spec, err);
    return rc ? rc : host_.no_driver ? 1 : 0;
}

static void test_parse(void **state)
{
    (void)state;
    int n;
    assert_int_equal(parse_("4x80G", &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(gpus_[3].props.total_bytes, 80 * GiB);
    assert_int_equal(gpus_[3].props.free_bytes, 80 * GiB);
    assert_string_equal(gpus_[0].props.uuid, "GPU-5117a000-0000-4000-8000-000000000000");
    assert_string_equal(gpus_[3].props.uuid, "GPU-5117a000-0000-4000-8000-000000000003");
    assert_int_equal(gpus_[0].props.compute_mode, GPU_MODE_DEFAULT);

    assert_int_equal(parse_("2x24G/exclusive/used=4G,1x80G/prohibited/name=H100", &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(gpus_[1].props.compute_mode, GPU_MODE_EXCLUSIVE_PROCESS);
    assert_int_equal(gpus_[1].props.free_bytes, 20 * GiB);
    assert_int_equal(gpus_[2].props.compute_mode, GPU_MODE_PROHIBITED);
    assert_string_equal(gpus_[2].props.name, "H100");

    assert_int_equal(parse_("1x80G/mig=4", &n), 0);
    assert_int_equal(n, 4);
    assert_true(gpus_[2].props.mig);
    assert_int_equal(gpus_[2].props.total_bytes, 20 * GiB);
    assert_string_equal(gpus_[2].props.uuid, "MIG-5117a000-0000-4000-8000-000000000002");

    assert_int_equal(parse_("2x40G/failing=1", &n), 0);
    assert_false(gpus_[0].failing);
    assert_true(gpus_[1].failing);

    // The driver's CUDA version, as cudaDriverGetVersion gives it.
    assert_int_equal(parse_("driver=12.8,1x80G", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(host_.driver_version, 12080);
    assert_int_equal(parse_("1x80G,driver=13", &n), 0);
    assert_int_equal(host_.driver_version, 13000);
    assert_int_equal(parse_("driver=12.4", &n), 0); // a driver, no GPU
    assert_int_equal(n, 0);
    assert_int_equal(parse_("4x80G", &n), 0);
    assert_int_equal(host_.driver_version, 0); // new enough
    assert_int_equal(parse_("driver=12.x,1x80G", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("driver=,1x80G", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("driver=12.10,1x80G", &n), VGPU_ECONFIG);

    assert_int_equal(parse_("nodriver", &n), 1);
    assert_int_equal(n, 0);
    assert_int_equal(parse_("none", &n), 0);
    assert_int_equal(n, 0);

    // Each mistake is refused with a reason.
    assert_int_equal(parse_("4x", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("0x80G", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("80", &n), VGPU_ECONFIG); // 80 bytes: not a GPU
    assert_int_equal(parse_("1x80G/fast", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("1x80G/used=90G", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("2x80G/failing=2", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("1x80G/mig=8", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("65x1G", &n), VGPU_ECONFIG);
    assert_int_equal(parse_("", &n), VGPU_ECONFIG);
}

static void test_visible(void **state)
{
    (void)state;
    int n, order[GPU_MAX];
    assert_int_equal(parse_("4x80G", &n), 0);
    assert_int_equal(gpu_sim_visible(gpus_, n, NULL, order, GPU_MAX), 4);
    assert_int_equal(gpu_sim_visible(gpus_, n, "", order, GPU_MAX), 0);
    assert_int_equal(gpu_sim_visible(gpus_, n, "2", order, GPU_MAX), 1);
    assert_int_equal(order[0], 2);
    assert_int_equal(gpu_sim_visible(gpus_, n, "3,1", order, GPU_MAX), 2);
    assert_int_equal(order[0], 3);
    assert_int_equal(order[1], 1);
    // Up to the first entry that names nothing, as CUDA does.
    assert_int_equal(gpu_sim_visible(gpus_, n, "1,7,2", order, GPU_MAX), 1);
    assert_int_equal(gpu_sim_visible(gpus_, n, "1,1", order, GPU_MAX), 1);
    // UUIDs and unambiguous prefixes.
    assert_int_equal(gpu_sim_visible(gpus_, n, "GPU-5117a000-0000-4000-8000-000000000002", order,
                                     GPU_MAX),
                     1);
    assert_int_equal(order[0], 2);
    assert_int_equal(gpu_sim_visible(gpus_, n, "GPU-5117a", order, GPU_MAX), 0); // ambiguous
    assert_int_equal(parse_("1x80G/mig=3", &n), 0);
    assert_int_equal(gpu_sim_visible(gpus_, n, "MIG-5117a000-0000-4000-8000-000000000001", order,
                                     GPU_MAX),
                     1);
    assert_int_equal(order[0], 1);
    // CUDA enumerates one MIG instance a process: the first listed, or with
    // no list the first on the host; GPUs without MIG beside it stay.
    assert_int_equal(gpu_sim_visible(gpus_, n, NULL, order, GPU_MAX), 1);
    assert_int_equal(order[0], 0);
    assert_int_equal(gpu_sim_visible(gpus_, n,
                                     "MIG-5117a000-0000-4000-8000-000000000002,"
                                     "MIG-5117a000-0000-4000-8000-000000000000",
                                     order, GPU_MAX),
                     1);
    assert_int_equal(order[0], 2);
    assert_int_equal(parse_("1x80G,1x80G/mig=2,1x40G", &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(gpu_sim_visible(gpus_, n, NULL, order, GPU_MAX), 3);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 1);
    assert_int_equal(order[2], 3);
    // Ordinals index CUDA's own enumeration (GPU 0, the first MIG instance,
    // the 40G GPU), not the instances it hides: 2 is the 40G GPU, 1 the MIG
    // instance, 3 names nothing (the list ends there).
    assert_int_equal(gpu_sim_visible(gpus_, n, "2,1,3", order, GPU_MAX), 2);
    assert_int_equal(order[0], 3);
    assert_int_equal(order[1], 1);
    assert_int_equal(parse_("1x80G/mig=2,1x40G", &n), 0);
    assert_int_equal(gpu_sim_visible(gpus_, n, "1", order, GPU_MAX), 1);
    assert_int_equal(order[0], 2);
}

// A driver of an older CUDA major version than the runtime is refused with
// both versions and the way out; the same major (minor-version
// compatibility), a newer one or none at all (the CPU stands in) pass.
static void test_driver_version(void **state)
{
    (void)state;
    char err[512] = "";
    assert_int_equal(gpu_driver_check_version(12080, 13000, err, sizeof err), VGPU_ENODEV);
    assert_non_null(strstr(err, "the NVIDIA driver supports CUDA 12.8, older than the CUDA 13.0 "
                                "runtime this vgpu was built with (it needs driver R580 or newer)"));
    assert_non_null(strstr(err, "build vgpu with a CUDA 12 toolkit"));
    assert_non_null(strstr(err, "devices.kind = cpu"));
    assert_int_equal(gpu_driver_check_version(12090, 13000, err, sizeof err), VGPU_ENODEV);
    assert_int_equal(gpu_driver_check_version(11080, 12040, err, sizeof err), VGPU_ENODEV);
    assert_non_null(strstr(err, "R525"));
    assert_int_equal(gpu_driver_check_version(13000, 13000, err, sizeof err), 0);
    assert_int_equal(gpu_driver_check_version(13020, 13000, err, sizeof err), 0);
    assert_int_equal(gpu_driver_check_version(13000, 13020, err, sizeof err), 0);
    assert_int_equal(gpu_driver_check_version(12000, 12080, err, sizeof err), 0);
    assert_int_equal(gpu_driver_check_version(0, 13000, err, sizeof err), 0);
}

static void test_mps_limit(void **state)
{
    (void)state;
    assert_int_equal(gpu_mps_client_limit("0=10240MB,1=2G", 0), 10 * GiB);
    assert_int_equal(gpu_mps_client_limit("0=10240MB,1=2G", 1), 2 * GiB);
    assert_int_equal(gpu_mps_client_limit("0=10240MB,1=2G", 2), 0);
    assert_int_equal(gpu_mps_client_limit(NULL, 0), 0);
    assert_int_equal(gpu_mps_client_limit("0=lots", 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_visible),
        cmocka_unit_test(test_mps_limit),
        cmocka_unit_test(test_driver_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
