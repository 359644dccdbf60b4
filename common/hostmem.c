// hostmem.c: see hostmem.h.
#include "hostmem.h"

#include <stdio.h>
#include <string.h>

uint64_t hostmem_meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kib = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            sscanf(line + n + 1, "%llu", &kib);
            break;
        }
    fclose(f);
    return (uint64_t)kib * 1024;
}

static int read_u64_(const char *path, uint64_t *v)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    unsigned long long x = 0;
    int ok = fscanf(f, "%llu", &x) == 1; // "max" (no limit) does not parse
    fclose(f);
    *v = x;
    return ok ? 0 : -1;
}

// Room left under the tightest limit `max_file` (usage in `cur_file`) of the
// cgroup `rel` below `base` and of its ancestors; UINT64_MAX if none is set.
static uint64_t headroom_under_(const char *base, const char *rel, const char *max_file,
                                const char *cur_file)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s%s", base, rel);
    uint64_t room = UINT64_MAX;
    for (;;) {
        char file[600];
        uint64_t max, cur;
        snprintf(file, sizeof file, "%s/%s", dir, max_file);
        if (read_u64_(file, &max) == 0) {
            snprintf(file, sizeof file, "%s/%s", dir, cur_file);
            if (read_u64_(file, &cur) < 0)
                cur = 0;
            uint64_t left = max > cur ? max - cur : 0;
            room = left < room ? left : room;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < strlen(base))
            break;
        *slash = '\0';
    }
    return room;
}

// Room left under this process's memory cgroup (v2 memory.max or v1
// memory.limit_in_bytes, and their ancestors'); UINT64_MAX when unlimited.
uint64_t hostmem_cgroup_room(void)
{
    uint64_t room = UINT64_MAX;
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return room;
    char line[448];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *rel = NULL;
        uint64_t r = UINT64_MAX;
        if (!strncmp(line, "0::", 3))
            r = headroom_under_("/sys/fs/cgroup", rel = line + 3, "memory.max", "memory.current");
        else if ((rel = strstr(line, ":memory:")))
            r = headroom_under_("/sys/fs/cgroup/memory", rel + 8, "memory.limit_in_bytes",
                                "memory.usage_in_bytes");
        room = r < room ? r : room;
    }
    fclose(f);
    return room;
}

uint64_t hostmem_available(void)
{
    const uint64_t avail = hostmem_meminfo("MemAvailable"), room = hostmem_cgroup_room();
    return room < avail || !avail ? room : avail;
}
