// attention_docs: the bounds of the attention kernels' walks (flash_attention.comp,
// attention_block.glsl, repro_attention.glsl), by packed documents and
// the sliding window. Packed documents are runs of positions with one id
// (as packing writes them; block-causal by document). With p.window = w
// > 0 (0: none) query t sees the keys t' <= t with t − t' < w (Mistral's
// and Gemma's masks). key_first(b, t) is the first key query t sees (the
// first position of its document's run, or of its window), query_past(b,
// s) the position after the last query row that sees key s; each scans
// the document's run no further than the window reaches (O(w) per
// invocation, not the document's length). The includer declares the push
// constants p (has_doc, doc_off, T, window) and the ids' binding doc,
// (B,T) from doc_off. A walk bounded by them leaves out only positions no
// row of the invocation takes, so the bits are those of the whole walk; a
// bound, not a mask, since llvmpipe runs a loop body under an all-false
// mask at full cost.
#ifndef ATTENTION_DOCS_GLSL
#define ATTENTION_DOCS_GLSL
bool in_window(uint t, uint s)
{
    return p.window == 0u || t - s < p.window; // s <= t (else the causal test fails it)
}
uint window_first(uint t)
{
    return p.window != 0u && t >= p.window ? t + 1u - p.window : 0u;
}
uint window_past(uint s)
{
    return p.window != 0u ? min(p.T, s + p.window) : p.T;
}
uint key_first(uint b, uint t)
{
    uint lo = window_first(t);
    if (p.has_doc == 0u)
        return lo;
    uint row = p.doc_off + b * p.T;
    int dt = doc[row + t];
    while (t > lo && doc[row + t - 1u] == dt)
        t--;
    return t;
}
uint query_past(uint b, uint s)
{
    uint hi = window_past(s);
    if (p.has_doc == 0u)
        return hi;
    uint row = p.doc_off + b * p.T;
    int ds = doc[row + s];
    s++;
    while (s < hi && doc[row + s] == ds)
        s++;
    return s;
}
#endif
