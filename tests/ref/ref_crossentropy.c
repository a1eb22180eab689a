/*
 * ref_crossentropy.c — reference masked softmax cross-entropy fused with its
 * backward (declared in ref_ops.h). Double precision, plain loops.
 *
 * It WRITES dlogits (every row: valid rows get (softmax − onehot)·scale,
 * ignored and out-of-range rows get exactly 0) and ADDS to *loss_sum and
 * *count. A label is used as an index only after it is checked to be in
 * [0, V); an ignored row's logits are never read.
 */
#include "ref_ops.h"

#include <math.h>

int ref_crossentropy_forward_backward(double *dlogits, double *loss_sum, int *count, const double *logits,
                                      const int32_t *labels, int N, int V, double scale)
{
    // dlogits, logits are (N,V), labels is (N)
    int out_of_range = 0;
    for (int n = 0; n < N; n++) {
        int32_t label = labels[n];
        int valid = label >= 0 && label < V;
        if (!valid && label != REF_IGNORE_INDEX)
            out_of_range++;
        if (!valid) {
            if (dlogits) {
                for (int i = 0; i < V; i++) {
                    dlogits[(size_t)n * V + i] = 0.0;
                }
            }
            continue;
        }

        // loss = logsumexp(x) − x[label], with the max subtracted for stability
        const double *x = logits + (size_t)n * V;
        double maxv = -INFINITY;
        for (int i = 0; i < V; i++) {
            if (x[i] > maxv)
                maxv = x[i];
        }
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            sum += exp(x[i] - maxv);
        }
        double lse = maxv + log(sum);
        *loss_sum += lse - x[label];
        *count += 1;

        // dloss/dx[i] = softmax(x)[i] − [i == label]
        if (dlogits) {
            for (int i = 0; i < V; i++) {
                double p = exp(x[i] - lse);
                dlogits[(size_t)n * V + i] = (p - (i == label ? 1.0 : 0.0)) * scale;
            }
        }
    }
    return out_of_range;
}
