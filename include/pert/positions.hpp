// The positional interface (DESIGN.md §2). A scheme implements the hooks it needs:
//   1. add to the token embeddings at the input        (learned, sinusoidal)
//   2. rotate queries and keys                         (rope family, xPos)
//   3. add a bias to attention scores by (query, key, head)   (alibi, t5)
// The model and the attention kernel call these hooks and never name a scheme. Each scheme
// lives in its own file under src/positions/ and has one entry in the registry (registry.cpp).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/config.hpp"
#include "pert/error.hpp"

namespace pert {

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// A scheme's own weights, looked up by tensor name (already F32, shape checked).
using TensorLookup = std::function<const float*(const std::string& name)>;

// One instance per inference state: begin_forward() may cache tables for the positions at hand.
class PositionEncoding {
 public:
  virtual ~PositionEncoding() = default;

  // Length-dependent schemes (dynamic NTK, LongRoPE) encode position m as part of a sequence
  // of m + 1 tokens, so they stay causal: the output at m never depends on later tokens, and
  // one prefill equals token-by-token decoding. length_class(m) names the length whose
  // encoding m uses; the model runs consecutive positions of one class in one forward.
  // Schemes that do not depend on length return 0 everywhere.
  virtual int length_class(int pos) const { (void)pos; return 0; }

  // Positions the scheme can encode (a learned table's rows), 0 for any: callers refuse a longer
  // context up front rather than at the first position past it.
  virtual int max_positions() const { return 0; }

  // Called before each forward over positions [pos0, pos0 + n), all of length class `length`.
  virtual void begin_forward(int length, int pos0, int n) { (void)length, (void)pos0, (void)n; }

  // Hook 1. x: [n][hidden] embeddings of positions pos0..pos0+n-1.
  virtual void add_to_embeddings(float* x, int pos0, int n) const { (void)x, (void)pos0, (void)n; }

  // Hook 2. Rotates head vectors in place: vector (t, h), t < n_pos, h < n_heads, lives at
  // x + t*pos_stride + h*head_stride and has position pos0 + t. Queries and keys differ only
  // for xPos (which scales them in opposite directions).
  virtual bool rotates() const { return false; }
  virtual void rotate(float* x, int pos0, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride,
                      bool is_query) const {
    (void)x, (void)pos0, (void)n_pos, (void)n_heads, (void)pos_stride, (void)head_stride, (void)is_query;
  }
  // True when the rotation depends on the length: keys are then cached unrotated and rotated
  // when read, so no cached key is ever stale.
  virtual bool rotates_keys_on_read() const { return false; }

  // Context shift: cached keys of n_pos positions (laid out as for rotate()) move back by
  // `delta` positions. Bias schemes and NoPE depend on distances only: nothing to do. A cache
  // cannot follow when positions are baked into the token states (learned, sinusoidal):
  // can_shift() is false and the caller re-encodes the tokens instead.
  virtual bool can_shift() const { return true; }
  virtual void shift_keys(float* k, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride,
                          int delta) {
    (void)k, (void)n_pos, (void)n_heads, (void)pos_stride, (void)head_stride, (void)delta;
  }

  // Hook 3. scores[i] += bias(query_pos, key position key0 + i, head) for i in [0, n_keys).
  virtual bool has_bias() const { return false; }
  virtual void add_bias(float* scores, int head, int query_pos, int key0, int n_keys) const {
    (void)scores, (void)head, (void)query_pos, (void)key0, (void)n_keys;
  }
};

// A scheme's own block of the config, parsed and validated by the scheme's file (one parse
// function registered in src/positions/registry.cpp), which also says what the block means,
// which tensors the scheme adds to the model and how to build its encoder.
class SchemeConfig {
 public:
  virtual ~SchemeConfig() = default;
  virtual const char* type() const = 0;                         // the registry name: "rope", ...
  virtual nlohmann::json to_json() const = 0;                   // the block, every default filled in
  virtual std::string describe(int head_dim) const = 0;         // one line in words
  virtual std::vector<ExpectedTensor> tensors(const ModelConfig& c) const { (void)c; return {}; }
  virtual std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const = 0;
};

template <class T>
const T& PositionConfig::as() const {
  const T* block = dynamic_cast<const T*>(scheme.get());
  if (!block) throw Error("the position scheme is '" + type() + "', not the one asked for");
  return *block;
}

// The tensors a scheme adds to the model (learned table, t5 bias table).
std::vector<ExpectedTensor> position_tensors(const ModelConfig& config);

// Builds the scheme that `config.position` names.
std::unique_ptr<PositionEncoding> make_position_encoding(const ModelConfig& config, const TensorLookup& tensors);

// How a scheme alone weighs distance (the picture in the RoPE, ALiBi and xPos papers): the
// attention logit the kernel computes, q·k/√head_dim + bias, for q = k = ones before the
// scheme acts, a query at `query_pos` and keys 0..max_distance positions back.
// Returns [head][distance]. Schemes that add positions to the embeddings (learned,
// sinusoidal) have no per-head q and k: one row of p(m)·p(n)/√hidden, p the position vectors.
std::vector<std::vector<double>> distance_profile(const ModelConfig& config, const TensorLookup& tensors,
                                                  int query_pos, int max_distance);

// Formulas exposed for the property tests (RoPE's are in rope.hpp).
std::vector<double> alibi_slopes(int n_heads, double max_bias);
int t5_bucket(int distance, int num_buckets, int max_distance);  // distance = m - n >= 0

}  // namespace pert
