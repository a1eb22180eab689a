/* test_validation: proves that the validation pass can fail. It makes one
 * deliberately invalid Vulkan call (a zero-sized buffer) with the Khronos
 * layer on and expects gpu_destroy to end the process through vkt_fatal.
 * If the layer were silently absent or its messages ignored, this test
 * would fail. */
#include <stdio.h>
#include <unistd.h>

#include "../src/gpu/gpu_internal.h"
#include "vktrain/util.h"

static void caught(int code)
{
    (void)code;
    printf("test_validation: the validation message ended the run, as it must\n");
    fflush(stdout);
    _exit(0);
}

int main(void)
{
    struct gpu_options opt = {.device_index = -1, .validate = 1, .quiet = 1};
    struct gpu *g = gpu_create(&opt);
    vkt_set_exit_hook(caught);
    VkBufferCreateInfo bad = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = 0, /* VUID-VkBufferCreateInfo-size-00912 */
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
    };
    VkBuffer b = VK_NULL_HANDLE;
    if (vkCreateBuffer(g->device, &bad, NULL, &b) == VK_SUCCESS && b)
        vkDestroyBuffer(g->device, b, NULL);
    gpu_destroy(g);
    fprintf(stderr, "FAIL test_validation: an invalid call went unreported\n");
    return 1;
}
