/* matmul_testing: the three matmul layouts as the op tests drive them
 * (test_ops, test_coopmat): the op call with the first input and the
 * output `lead` floats into their buffers, and the C reference.
 *   nt: a = X (M,K), b = W (N,K), c = Y (M,N)
 *   nn: a = dY (M,N), b = W (N,K), c = dX (M,K)
 *   tn: a = dY (M,N), b = X (M,K), c = dW (N,K) */
#ifndef VKTRAIN_MATMUL_TESTING_H
#define VKTRAIN_MATMUL_TESTING_H

#include "gpu_testing.h"
#include "ref_ops.h"
#include "vktrain/ops.h"

enum matmul_layout { NT, NN, TN };
static const char *const matmul_layout_name[] = {"nt", "nn", "tn"};

/* The product of layout l (op_matmul_*_at). */
static inline void matmul_run(struct gpu *g, enum matmul_layout l, struct gpu_buffer *a, struct gpu_buffer *b,
                              struct gpu_buffer *c, int M, int N, int K, int accumulate, size_t lead)
{
    const size_t off[3] = {lead, 0, lead};
    if (l == NT)
        op_matmul_nt_at(g, a, b, c, (uint32_t)M, (uint32_t)N, (uint32_t)K, accumulate, off, NULL);
    else if (l == NN)
        op_matmul_nn_at(g, a, b, c, (uint32_t)M, (uint32_t)N, (uint32_t)K, accumulate, off, NULL);
    else
        op_matmul_tn_at(g, a, b, c, (uint32_t)M, (uint32_t)N, (uint32_t)K, accumulate, off, NULL);
}

/* ref (+)= the product of layout l, in double (the C reference). */
static inline void matmul_reference(enum matmul_layout l, const double *a, const double *b, double *ref, int M, int N,
                                    int K)
{
    size_t nc = l == NT ? (size_t)M * N : l == NN ? (size_t)M * K : (size_t)N * K;
    double *tmp = vkt_calloc(nc, sizeof *tmp, "reference");
    if (l == NT) {
        ref_matmul_forward(tmp, a, b, NULL, M, K, N);
    } else if (l == NN) {
        double *unused = vkt_calloc((size_t)M * K, sizeof *unused, "reference");
        ref_matmul_backward(tmp, NULL, NULL, a, unused, b, M, K, N);
        free(unused);
    } else {
        ref_matmul_backward(NULL, tmp, NULL, a, b, NULL, M, K, N);
    }
    for (size_t i = 0; i < nc; i++)
        ref[i] += tmp[i];
    free(tmp);
}

#endif
