// gelu: the GELU (tanh approximation) pieces the activation shaders share,
// written for float or vec4 alike. With u = k·(x + 0.044715·x³), k = √(2/π),
//   0.5·x·(1 + tanh u) = x·s,  s = σ(2u) = 1/(1 + exp(−2u)),
//   its derivative  s + 2·x·s·(1 − s)·k·(1 + 3·0.044715·x²),
// the same function without the cancellation 1 + tanh(u) suffers for very
// negative x (which cost the tanh form its relative precision there). u
// is clamped to ±40 so exp(−2u) stays finite in float (s ≥ 1.8e-35).
const float GELU_K = 0.7978845608028654;
#define GELU_S(x) (1.0 / (1.0 + exp(-2.0 * clamp(GELU_K * ((x) + 0.044715 * (x) * (x) * (x)), -40.0, 40.0))))
#define GELU_DS(x, s) ((s) + 2.0 * (x) * (s) * (1.0 - (s)) * GELU_K * (1.0 + 3.0 * 0.044715 * (x) * (x)))
