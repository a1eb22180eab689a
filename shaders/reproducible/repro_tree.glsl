// repro_tree: the reproducible mode's fixed summation tree, for kernels
// that sum (shaders/repro_sum.comp over a vector, repro_rowsum.comp per
// row; the norms and the loss next). The sum of n floats is the pairwise
// tree over them padded with +0 to a power of two, adjacent pairs first,
// plus a final +0 (a −0 total becomes +0, so a padding to any larger power
// of two gives the same bits; repro_sum_ref in src/repro/repro_sum.c is
// the C). Its shape depends on the element index only, so it can be cut
// anywhere on a power-of-two boundary: an invocation sums an aligned run of
// 2^k elements (repro_tree_run), the workgroup combines its invocations'
// runs in shared memory (repro_tree_workgroup), and a later pass combines
// workgroups' results the same way. Workgroup size (a power of two) and run
// length never change the bits.
//
// Include after the kernel's local size and after defining
// REPRO_TREE_LOAD(i), the element i (called only for i < n), and
// REPRO_TREE_MAX_LOG, the largest log_run, where it is not 10.

#ifndef REPRO_TREE_MAX_LOG
#define REPRO_TREE_MAX_LOG 10
#endif

shared float repro_tree_s[gl_WorkGroupSize.x];

// The binary counter: leaf j's subtree v (of 2^low leaves) joins the
// pending subtrees in stack from level low up.
#define REPRO_TREE_PUSH(stack, j, low, v)                                                                   \
    {                                                                                                       \
        uint level_ = low;                                                                                  \
        while ((((j) >> level_) & 1u) != 0u) {                                                              \
            v = stack[level_] + v;                                                                          \
            level_++;                                                                                       \
        }                                                                                                   \
        stack[level_] = v;                                                                                  \
    }

// The tree over elements first .. first + 2^log_run − 1 (+0 past n);
// log_run <= REPRO_TREE_MAX_LOG. Runs of 4 or more (first is then a
// multiple of 4) take four leaves per step as the tree's two lowest
// levels, ((a + b) + (c + d)), and push one subtree where the leaf-by-leaf
// loop pushes four: the same additions, a quarter of the stack's traffic
// (indexed by a variable level, which a CPU device serves lane by lane).
float repro_tree_run(uint first, uint log_run, uint n)
{
    precise float stack[REPRO_TREE_MAX_LOG + 1];
    uint run = 1u << log_run;
    if (log_run >= 2u) {
        for (uint j = 0u; j < run; j += 4u) {
            uint i = first + j;
            precise float a = i < n ? REPRO_TREE_LOAD(i) : 0.0f;
            precise float b = i + 1u < n ? REPRO_TREE_LOAD(i + 1u) : 0.0f;
            precise float c = i + 2u < n ? REPRO_TREE_LOAD(i + 2u) : 0.0f;
            precise float d = i + 3u < n ? REPRO_TREE_LOAD(i + 3u) : 0.0f;
            precise float ab = a + b;
            precise float cd = c + d;
            precise float v = ab + cd;
            REPRO_TREE_PUSH(stack, j, 2u, v)
        }
        return stack[log_run];
    }
    for (uint j = 0u; j < run; j++) {
        uint i = first + j;
        precise float v = i < n ? REPRO_TREE_LOAD(i) : 0.0f;
        REPRO_TREE_PUSH(stack, j, 0u, v)
    }
    return stack[log_run];
}

// The tree over the workgroup's values, invocation order; every invocation
// calls it (it has barriers) and gets the total.
float repro_tree_workgroup(float mine)
{
    uint lid = gl_LocalInvocationID.x;
    repro_tree_s[lid] = mine;
    barrier();
    for (uint h = 1u; h < gl_WorkGroupSize.x; h <<= 1) {
        if ((lid & (2u * h - 1u)) == 0u) {
            precise float v = repro_tree_s[lid] + repro_tree_s[lid + h];
            repro_tree_s[lid] = v;
        }
        barrier();
    }
    float total = repro_tree_s[0];
    barrier();
    return total;
}

#ifdef REPRO_TREE_LOAD4
// repro_tree_run(0, log_run, n) for n % 4 == 0 and log_run >= 2 from
// REPRO_TREE_LOAD4(i4), elements 4·i4 .. 4·i4 + 3 as one vec4: each step
// adds its four leaves as the tree's two lowest levels, ((a + b) + (c + d)).
float repro_tree_run4(uint log_run, uint n)
{
    precise float stack[REPRO_TREE_MAX_LOG + 1];
    uint run = 1u << log_run;
    for (uint j = 0u; j < run; j += 4u) {
        precise vec4 q = j < n ? REPRO_TREE_LOAD4(j >> 2) : vec4(0.0f);
        precise float ab = q.x + q.y;
        precise float cd = q.z + q.w;
        precise float v = ab + cd;
        REPRO_TREE_PUSH(stack, j, 2u, v)
    }
    return stack[log_run];
}
#endif
