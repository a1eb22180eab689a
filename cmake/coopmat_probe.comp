#version 450
// cmake/Shaders.cmake compiles this to learn whether a glslc has
// GL_KHR_cooperative_matrix (and, with -DBF16=1, GL_EXT_bfloat16).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#if BF16
#extension GL_EXT_bfloat16 : require
#define T bfloat16_t
#else
#define T float16_t
#endif
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer Out { float x[]; };
void main()
{
    coopmat<T, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a = coopmat<T, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>(1.0);
    coopmat<T, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b = coopmat<T, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>(1.0);
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    c = coopMatMulAdd(a, b, c);
    coopMatStore(c, x, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
