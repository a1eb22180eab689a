// wg1d: the workgroup of the 1-D kernels that share memory across it. Its
// size WG is specialization constant 0, chosen by gpu_workgroup_1d
// (src/gpu/gpu_device.c), which never exceeds WG_MAX
// (GPU_WORKGROUP_1D_MAX). Shared arrays are sized by WG_MAX, not WG:
// SPIRV-Cross (MoltenVK) sizes an array by a specialization constant's
// default, whatever value the pipeline gives it.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
#define WG_MAX 256
