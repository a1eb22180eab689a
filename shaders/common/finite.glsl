// finite: the softmax kernels' stand-in for minus infinity. A driver may
// compile shaders as if no value were Inf or NaN (MoltenVK's fast math;
// any driver where SPIR-V does not declare SignedZeroInfNanPreserve), so
// no kernel writes −inf, compares with it or takes exp of it: a running
// max starts at NO_SCORE, and which entries are masked is an explicit
// flag, never read back from a value.
const float NO_SCORE = -3.0e38;
