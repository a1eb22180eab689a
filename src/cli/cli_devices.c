/* cli_devices: `vktrain devices`, the Vulkan devices with the limits and
 * features vktrain cares about, and which one would be chosen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vktrain/cli.h"
#include "vktrain/gpu.h"
#include "vktrain/kernel_select.h"
#include "vktrain/shaders.h"

static const char *vendor_name(uint32_t id)
{
    switch (id) {
    case 0x1002: return "AMD";
    case 0x10DE: return "NVIDIA";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: return "unknown";
    }
}

static const char *yes(int v) { return v ? "yes" : "no"; }

/* The mark after a limit that VKTRAIN_DEVICE_LIMITS lowered. */
static const char *tight(const struct gpu_device_info *x, unsigned bit)
{
    return x->tightened & bit ? "  (tightened by VKTRAIN_DEVICE_LIMITS)" : "";
}

/* The kernel table: every SPIR-V module of this build, by family. */
static void list_kernels(void)
{
    static const char *const families[] = {"common", "default", "reproducible"};
    int left_out = 0;
    for (int f = 0; f < 3; f++) {
        int n = 0;
        for (int i = SHADER_NONE + 1; i < SHADER_COUNT; i++)
            n += !strcmp(shader_blobs[i].family, families[f]);
        printf("%s%s kernels (shaders/%s, %d modules)\n", f ? "\n" : "", families[f], families[f], n);
        for (int i = SHADER_NONE + 1; i < SHADER_COUNT; i++) {
            const struct shader_blob *b = &shader_blobs[i];
            if (strcmp(b->family, families[f]))
                continue;
            left_out += !b->code;
            printf("  %-46s %-40s %s%s%s%s\n", b->name, b->file, b->defines, b->code ? "" : "  [not built: needs ",
                   b->code ? "" : b->needs, b->code ? "" : "]");
        }
    }
    printf("\n%d modules, %d of them not in this build\n", SHADER_COUNT - 1, left_out);
}

int cli_devices(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: vktrain devices [--list-kernels]\n\nLists the Vulkan devices and marks the one "
                   "`vktrain train` would use\n(automatic: discrete > integrated > virtual > cpu; VKTRAIN_DEVICE=N "
                   "overrides),\nand the environment variables that change the kernels' choice.\n"
                   "--list-kernels: the kernel table instead, every SPIR-V module of this build\n"
                   "(family, file, the variant's defines).\n");
            return 0;
        }
        if (!strcmp(argv[i], "--list-kernels")) {
            list_kernels();
            return 0;
        }
        fprintf(stderr, "vktrain: error: `devices` takes no argument but --list-kernels, got '%s'\n", argv[i]);
        return 2;
    }
    struct gpu_device_info *d;
    int n = gpu_list_devices(&d, 0);
    struct gpu_options opt = {.device_index = -1};
    int pick = gpu_pick_device(d, n, &opt);
    printf("%d Vulkan device(s)\n", n);
    for (int i = 0; i < n; i++) {
        const struct gpu_device_info *x = &d[i];
        printf("\n%s device %d: %s\n", i == pick ? "*" : " ", x->index, x->name);
        printf("    type                 %s\n", x->type);
        printf("    vendor               %s (0x%04x), device 0x%04x\n", vendor_name(x->vendor_id), x->vendor_id,
               x->device_id);
        printf("    driver               %s (%s)\n", x->driver_name, x->driver_info);
        printf("    Vulkan               %u.%u.%u\n", (unsigned)((x->api_version >> 22) & 0x7f),
               (unsigned)((x->api_version >> 12) & 0x3ff), (unsigned)(x->api_version & 0xfff));
        printf("    subgroup size        %u (arithmetic %s, shuffle %s, ballot %s)\n", x->subgroup_size,
               yes(x->subgroup_arithmetic), yes(x->subgroup_shuffle), yes(x->subgroup_ballot));
        printf("    shared memory        %u bytes%s\n", x->shared_memory, tight(x, GPU_LIMIT_SHARED));
        printf("    maxStorageBufferRange %u bytes (offsets aligned to %u)%s\n", x->max_storage_buffer_range,
               x->min_storage_offset_alignment, tight(x, GPU_LIMIT_STORAGE_RANGE));
        printf("    maxTexelBufferElements %u (offsets aligned to %u)%s\n", x->max_texel_buffer_elements,
               x->min_texel_offset_alignment, tight(x, GPU_LIMIT_TEXEL_ELEMENTS));
        printf("    workgroup            %u invocations, count %u x %u x %u%s\n", x->max_workgroup_invocations,
               x->max_workgroup_count[0], x->max_workgroup_count[1], x->max_workgroup_count[2],
               tight(x, GPU_LIMIT_WORKGROUPS));
        printf("    allocations          at most %u, each up to %llu bytes%s\n", x->max_allocation_count,
               (unsigned long long)x->max_allocation_size, tight(x, GPU_LIMIT_ALLOCATION));
        if (x->max_loop_iterations)
            printf("    loop limit           %u iterations per invocation (kernels split longer loops)\n",
                   x->max_loop_iterations);
        printf("    features             float16 %s, int64 %s, RGBA32F texel buffers %s, bf16 texel views %s\n",
               yes(x->float16), yes(x->int64), yes(x->texel_vec4), yes(x->texel_bf16));
        char cm[2][32];
        const uint32_t *shapes[2] = {x->coopmat_f16, x->coopmat_bf16};
        for (int t = 0; t < 2; t++)
            if (shapes[t][0])
                snprintf(cm[t], sizeof cm[t], "%u x %u x %u", shapes[t][0], shapes[t][1], shapes[t][2]);
            else
                snprintf(cm[t], sizeof cm[t], "none");
        printf("    cooperative matrices f16 %s, bf16 %s (fp32 accumulators; this build's kernels: %s)\n", cm[0], cm[1],
               gpu_coopmat_built(GPU_MATMUL_BF16)  ? "f16, bf16"
               : gpu_coopmat_built(GPU_MATMUL_F16) ? "f16"
                                                   : "none, its glslc lacks them");
        for (uint32_t h = 0; h < x->heap_count; h++)
            printf("    memory heap %u        %.1f GiB%s\n", h, (double)x->heap_size[h] / (1 << 30),
                   x->heap_device_local[h] ? " device-local" : "");
        printf("    kernels              %s\n", gpu_cpu_device(x) ? "texel (CPU driver)" : "tiled (shared memory)");
        if (x->cpu_threads)
            printf("    threads              %u (LP_NUM_THREADS, else the online CPUs)\n", x->cpu_threads);
        if (!x->texel_rows_wg)
            printf("    workaround           rows written in place by a workgroup (the cross-entropy over a large\n"
                   "                         vocabulary) read through storage, not a texel view: this lavapipe\n"
                   "                         computed them wrong that way (docs/devices.md, \"Newer Mesa\")\n");
        if (!x->repro_hd16_vec4)
            printf("    workaround           the reproducible attention reads heads of 16 floats as R32F, not\n"
                   "                         RGBA32F texels: this lavapipe computed them wrong that way\n");
        if (!x->usable)
            printf("    unusable: it %s\n", x->unusable_reason);
    }
    unsigned tightened = 0;
    for (int i = 0; i < n; i++)
        tightened |= d[i].tightened;
    if (tightened)
        printf("\nlimits marked tightened act as VKTRAIN_DEVICE_LIMITS sets them, below the device's own\n");
    printf("\nkernel choice from the environment (docs/training.md, \"Environment\"):");
    int set = 0;
    for (int i = 0; i < KENV_COUNT; i++) {
        const char *v = kernel_env((enum kernel_env_id)i);
        if (v)
            printf("%s%s=%s", set++ ? ", " : " ", kernel_env_vars[i].name, v);
    }
    printf("%s\n", set ? "" : " none set");
    printf("  (");
    for (int i = 0; i < KENV_COUNT; i++)
        printf("%s%s=%s", i ? (i % 4 ? ", " : ",\n   ") : "", kernel_env_vars[i].name, kernel_env_vars[i].values);
    printf(")\n");
    if (pick >= 0)
        printf("\n* = chosen: device %d (%s)\n", pick, d[pick].name);
    else
        printf("\nno usable device\n");
    free(d);
    return pick >= 0 ? 0 : 1;
}
