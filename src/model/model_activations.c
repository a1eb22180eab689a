/* model_activations: the buffers a model created with batch > 0 holds
 * beside its parameters (include/vktrain/model.h): the activations each
 * layer saves for the backward, the backward's scratch, the LM head's
 * logits chunk, the matmul tn workspace (op_matmul_tn_scratch) and the
 * batch inputs; their bytes (model_activation_bytes) and their release. */
#include "model_internal.h"
#include "vktrain/kernel_select.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

struct gpu_buffer *model_act(struct model *m, size_t floats, const char *name)
{
    m->act_bytes += floats * sizeof(float);
    return gpu_buffer_create(m->g, floats * sizeof(float), name);
}

/* The logits chunk's budget: 128 MiB, and on a GPU 1/64 of its largest
 * device-local heap up to 1 GiB. The head's products over a chunk have
 * the chunk's rows as one side: on an H200 the 660-row chunks of 128 MiB
 * (GPT-2's vocabulary) left dX's nn a few dozen output tiles for 132
 * multiprocessors, at a third of the layers' matmul speed. A CPU device
 * (lavapipe) gains nothing from larger chunks and keeps its memory. */
static size_t head_budget(const struct gpu_device_info *info)
{
    size_t budget = (size_t)128 << 20, heap = 0;
    if (gpu_cpu_device(info))
        return budget;
    for (uint32_t h = 0; h < info->heap_count; h++)
        if (info->heap_device_local[h] && info->heap_size[h] > heap)
            heap = (size_t)info->heap_size[h];
    heap /= 64;
    if (heap > ((size_t)1 << 30))
        heap = (size_t)1 << 30;
    return heap > budget ? heap : budget;
}

/* Rows per LM-head chunk: the logits of a chunk within the budget, the
 * storage binding limit and the allocation limit, a multiple of the rows
 * whose float offsets meet the storage offset alignment (chunks start
 * there in the labels and row losses), at most every row. */
static uint32_t head_rows(const struct model *m)
{
    const struct gpu_device_info *info = gpu_info(m->g);
    size_t row_bytes = (size_t)m->logits_ld * sizeof(float), budget = head_budget(info);
    if (budget > info->max_storage_buffer_range)
        budget = info->max_storage_buffer_range;
    if (info->max_allocation_size && budget > info->max_allocation_size)
        budget = (size_t)info->max_allocation_size;
    size_t align = info->min_storage_offset_alignment;
    size_t step = align > sizeof(float) ? align / sizeof(float) : 1;
    size_t rows = m->c.head_rows ? m->c.head_rows : budget / row_bytes;
    rows -= rows % step;
    if (rows == 0 && m->c.head_rows)
        rows = step;
    if (rows == 0)
        vkt_fatal("model: %zu rows of %u logits (the storage offset alignment's rows) exceed the logits budget "
                  "of %zu bytes",
                  step, m->c.vocab_size, budget);
    return rows < m->max_rows ? (uint32_t)rows : m->max_rows;
}

void model_build_activations(struct model *m, uint32_t batch)
{
    const struct model_config *c = &m->c;
    size_t R = m->max_rows, C = c->dim, F = c->hidden_dim, H = c->n_heads, T = c->max_seq_len;
    size_t hd = model_head_dim(c), qd = H * hd, kv = c->n_kv_heads * hd, P = (size_t)batch * H * T;
    int llama = c->arch == MODEL_LLAMA;
    enum gpu_mem_category was = gpu_memory_category(m->g, GPU_MEM_ACTIVATIONS);
    m->la = vkt_calloc(c->n_layers, sizeof *m->la, "layer activations");
    int sets = c->activation_checkpointing ? 1 : (int)c->n_layers;
    struct op_attention_shape ls = {
        .B = (uint32_t)batch, .T = (uint32_t)T, .H = (uint32_t)H, .KVH = c->n_kv_heads, .hd = (uint32_t)hd};
    size_t lse_floats = op_flash_attention_lse_floats(m->g, &ls);
    for (uint32_t l = 0; l < c->n_layers; l++)
        m->la[l].x = model_act(m, R * C, "x");
    for (int l = 0; l < sets; l++) {
        struct layer_acts *a = c->activation_checkpointing ? &m->ckpt : &m->la[l];
        a->xn = model_act(m, R * C, "xn");
        a->mean1 = model_act(m, R, "mean1");
        a->rstd1 = model_act(m, R, "rstd1");
        if (llama) {
            a->q = model_act(m, R * qd, "q");
            a->k = model_act(m, R * kv, "k");
            a->v = model_act(m, R * kv, "v");
            if (c->qk_norm) {
                a->q_pre = model_act(m, R * qd, "q before its norm");
                a->k_pre = model_act(m, R * kv, "k before its norm");
                a->rstd_q = model_act(m, R * H, "rstd q");
                a->rstd_k = model_act(m, R * c->n_kv_heads, "rstd k");
            }
        } else {
            a->qkv = model_act(m, R * 3 * C, "qkv");
        }
        a->lse = model_act(m, lse_floats, "attention lse");
        a->att = model_act(m, R * qd, "att"); /* gpt2: qd == C */
        a->x2 = model_act(m, R * C, "x2");
        a->xn2 = model_act(m, R * C, "xn2");
        a->mean2 = model_act(m, R, "mean2");
        a->rstd2 = model_act(m, R, "rstd2");
        if (llama)
            a->gate = model_act(m, R * F, "gate");
        a->up = model_act(m, R * F, "up");
        a->h = model_act(m, R * F, "h");
        if (c->post_norms) {
            a->attn_o = model_act(m, R * C, "attention output");
            a->mlp_o = model_act(m, R * C, "MLP output");
            a->rstd_p1 = model_act(m, R, "rstd post attention");
            a->rstd_p2 = model_act(m, R, "rstd post MLP");
        }
        for (int s = 0; s < LS_N; s++) /* the shared set: if any layer adapts it */
            for (uint32_t k = c->activation_checkpointing ? 0 : (uint32_t)l; k < c->n_layers && !a->lora_u[s]; k++) {
                if (m->lp[k].lora_a[s] >= 0)
                    a->lora_u[s] = model_act(m, R * c->lora_rank, "lora u");
                if (!c->activation_checkpointing)
                    break;
            }
    }
    m->tokens = model_act(m, R, "tokens");
    m->labels = model_act(m, R, "labels");
    m->positions = model_act(m, R, "positions");
    m->doc_ids = model_act(m, R, "doc ids");
    m->x_final = model_act(m, R * C, "x final");
    m->xf = model_act(m, R * C, "xf");
    m->mean_f = model_act(m, R, "mean f");
    m->rstd_f = model_act(m, R, "rstd f");
    /* the pad of a row of whole texels is zeroed by the cross-entropy */
    m->logits_ld = kernel_logits_stride(m->g, c->vocab_size);
    m->head_rows = head_rows(m);
    m->logits = model_act(m, (size_t)m->head_rows * m->logits_ld, "logits");
    m->row_loss = model_act(m, R, "row loss");
    m->row_count = model_act(m, R, "row count");
    gpu_memory_category(m->g, GPU_MEM_WORKSPACE);
    m->stats = model_act(m, 2, "loss stats");
    m->loss_acc = model_act(m, 2, "loss accumulator");
    m->scratch = model_act(m, op_reduce_scratch(m->g, R), "reduce scratch");
    gpu_memory_category(m->g, GPU_MEM_ACTIVATIONS);
    m->dres = model_act(m, R * C, "dres");
    m->dxn = model_act(m, R * C, "dxn");
    m->datt = model_act(m, R * qd, "datt");
    m->att_stats = model_act(m, 2 * P, "attention row stats");
    if (llama) {
        m->dq = model_act(m, R * qd, "dq");
        m->dk = model_act(m, R * kv, "dk");
        if (c->qk_norm) {
            m->dq_pre = model_act(m, R * qd, "dq before the norm");
            m->dk_pre = model_act(m, R * kv, "dk before the norm");
        }
        m->dv = model_act(m, R * kv, "dv");
        m->dgate = model_act(m, R * F, "dgate");
    } else {
        m->dqkv = model_act(m, R * 3 * C, "dqkv");
    }
    m->dh = model_act(m, R * F, "dh");
    if (c->post_norms) {
        m->dpost = model_act(m, R * C, "d post norm input");
        m->post_tmp = model_act(m, R * C, "post norm output");
    }
    m->dup = model_act(m, R * F, "dup");
    if (c->lora_rank) {
        m->lora_du = model_act(m, R * c->lora_rank, "lora du");
        if (c->lora_dropout > 0) {
            size_t in = C; /* the widest adapted input: hidden_dim for down_proj, H·hd for o_proj, else dim */
            for (uint32_t l = 0; l < c->n_layers; l++) {
                if (m->lp[l].lora_a[LS_DOWN] >= 0 && F > in)
                    in = F;
                if (m->lp[l].lora_a[LS_O] >= 0 && qd > in)
                    in = qd;
            }
            m->lora_xd = model_act(m, R * in, "lora dropout");
        }
        size_t sink = c->qk_norm && hd > C ? hd : C;
        m->frozen_sink[0] = model_act(m, sink, "frozen norm gradient");
        m->frozen_sink[1] = model_act(m, sink, "frozen norm gradient");
    }
    /* The weight gradients' tn through transposes where the device takes
     * that path (op_matmul_tn_scratch): room for the widest (outputs
     * times rows): a layer's, or the LM head's over a chunk of
     * rows (about as large as the chunk's logits). With LoRA the base has
     * no gradients, and the adapters' (rank wide) take the tn kernel. */
    size_t rows = c->lora_rank ? 0 : R;
    const size_t wide[][3] = {{rows, llama ? qd : 3 * C, C},
                              {qd != C ? rows : 0, C, qd}, /* o_proj where it is not dim x dim */
                              {rows, kv, C},
                              {rows, F, C},
                              {rows, C, F},
                              {c->lora_rank ? 0 : m->head_rows, c->vocab_size, C}};
    size_t tn_bytes = 0;
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        size_t b = wide[i][0] ? op_matmul_tn_scratch(m->g, (uint32_t)wide[i][0], (uint32_t)wide[i][1],
                                                     (uint32_t)wide[i][2])
                              : 0;
        tn_bytes = b > tn_bytes ? b : tn_bytes;
    }
    if (tn_bytes) {
        m->tn_scratch = model_act(m, tn_bytes / sizeof(float), "matmul tn scratch");
        gpu_set_matmul_scratch(m->g, m->tn_scratch);
    }
    gpu_memory_category(m->g, was);
}

void model_destroy_activations(struct model *m)
{
    m->ckpt.x = NULL; /* a layer's, destroyed with it */
    for (uint32_t l = 0; m->la && l <= m->c.n_layers; l++) {
        struct layer_acts *a = l < m->c.n_layers ? &m->la[l] : &m->ckpt;
        struct gpu_buffer **b = (struct gpu_buffer **)a;
        for (size_t i = 0; i < sizeof *a / sizeof *b; i++)
            gpu_buffer_destroy(m->g, b[i]);
    }
    struct gpu_buffer *shared[] = {m->tokens,     m->labels,    m->positions, m->doc_ids,        m->x_final,
                                   m->xf,         m->mean_f,    m->rstd_f,    m->logits,         m->logits_kept,
                                   m->row_loss,   m->row_count, m->stats,     m->loss_acc,       m->scratch,
                                   m->rope_table, m->dres,      m->dxn,       m->datt,           m->att_stats,
                                   m->dq,         m->dk,        m->dv,        m->dqkv,           m->dh,
                                   m->dgate,      m->dup,       m->lora_du,   m->frozen_sink[0], m->frozen_sink[1],
                                   m->lora_xd,    m->dq_pre,    m->dk_pre,    m->rope_long, m->rope_local,
                                   m->dpost,      m->post_tmp};
    for (size_t i = 0; i < sizeof shared / sizeof *shared; i++)
        gpu_buffer_destroy(m->g, shared[i]);
    if (m->tn_scratch && gpu_matmul_scratch(m->g) == m->tn_scratch)
        gpu_set_matmul_scratch(m->g, NULL);
    gpu_buffer_destroy(m->g, m->tn_scratch);
}

uint32_t model_head_rows(const struct model *m)
{
    return m->head_rows;
}

size_t model_activation_bytes(const struct model *m)
{
    return m->act_bytes;
}
