// attention_docs: the runs of packed documents, for the attention kernels
// that bound their walks by them (flash_attention.comp,
// repro_attention.glsl). Packed documents are runs of positions with one
// id (as packing writes them; block-causal by document): doc_first(b, t)
// is the first position of t's run, doc_past(b, t) the one after its
// last. The includer declares the push constants p (has_doc, doc_off,
// T) and the ids' binding doc, (B,T) from doc_off. A walk bounded by them
// leaves out only positions no row of the invocation takes, so the bits
// are those of the whole walk; a bound, not a mask, since llvmpipe runs a
// loop body under an all-false mask at full cost.
#ifndef ATTENTION_DOCS_GLSL
#define ATTENTION_DOCS_GLSL
uint doc_first(uint b, uint t)
{
    if (p.has_doc == 0u)
        return 0u;
    uint row = p.doc_off + b * p.T;
    int dt = doc[row + t];
    while (t > 0u && doc[row + t - 1u] == dt)
        t--;
    return t;
}
uint doc_past(uint b, uint t)
{
    if (p.has_doc == 0u)
        return p.T;
    uint row = p.doc_off + b * p.T;
    int dt = doc[row + t];
    t++;
    while (t < p.T && doc[row + t] == dt)
        t++;
    return t;
}
#endif
