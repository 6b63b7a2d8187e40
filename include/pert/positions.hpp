// The positional interface (docs/design.md). A scheme implements the hooks it needs:
//   1. add to the token embeddings at the input        (learned, sinusoidal)
//   2. rotate queries and keys                         (rope family, xPos)
//   3. add a bias to attention scores by (query, key, head)   (alibi, t5, and per layer kerple, fire)
//   4. add terms that read the query and key vectors as well  (Transformer-XL, DeBERTa)
//   5. forget gates read from each token's layer input, their running sum a bias   (FoX)
//   6. weights by stick-breaking instead of a softmax                             (stick-breaking)
//   7. positions counted by gates on each query's scores, their embeddings a bias (CoPE)
// The model and the attention kernel call these hooks and never name a scheme. Each scheme
// lives in its own file under src/attention/positions/ and has one entry in the registry (src/attention/positions_registry.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/config.hpp"
#include "pert/error.hpp"

namespace pert {

// A scheme's own weights, looked up by tensor name (already F32, shape checked).
using TensorLookup = std::function<const float*(const std::string& name)>;

// One instance per inference state: begin_forward() may cache tables for the positions at hand.
class PositionEncoding {
 public:
  virtual ~PositionEncoding() = default;

  // Length-dependent schemes (dynamic NTK, LongRoPE by position) encode position m as part of a sequence
  // of m + 1 tokens, so they stay causal: the output at m never depends on later tokens, and
  // one prefill equals token-by-token decoding. length_class(m) names the length whose
  // encoding m uses; the model runs consecutive positions of one class in one forward.
  // Schemes that do not depend on length return 0 everywhere.
  virtual int length_class(int pos) const { (void)pos; return 0; }

  // A scheme may instead encode every position by the length of the whole sequence, as
  // transformers runs LongRoPE (its "longrope_choice": "sequence"): all positions of a forward,
  // and all cached ones, take the encoding of the sequence's length after it. Then
  // encodes_by_sequence_length() is true, sequence_class(length) names the encoding a sequence
  // of `length` tokens gives, and the caller says the length before each forward
  // (begin_sequence), after which length_class() returns that class at every position. When a
  // forward changes the class, the caller re-encodes the cached positions (InferenceState::forward).
  // Until begin_sequence is called, a sequence ends at each position asked about.
  virtual bool encodes_by_sequence_length() const { return false; }
  virtual int sequence_class(int length) const { (void)length; return 0; }
  virtual void begin_sequence(int length) { (void)length; }

  // Positions the scheme can encode (a learned table's rows), 0 for any: callers refuse a longer
  // context up front rather than at the first position past it.
  virtual int max_positions() const { return 0; }

  // Called once by an inference state of `positions` positions: tables that grow with the
  // context are sized here, so decoding allocates nothing.
  virtual void reserve(int positions) { (void)positions; }

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
  // Hook 2 at arbitrary real positions (the remapping methods of "extend"): vector t rotates as
  // if it stood at positions[t], with the frequencies begin_forward() set; thread-safe.
  virtual void rotate_at(float* x, const double* positions, int n_pos, int n_heads, ptrdiff_t pos_stride,
                         ptrdiff_t head_stride) const {
    (void)x, (void)positions, (void)n_pos, (void)n_heads, (void)pos_stride, (void)head_stride;
  }
  // Explicit positions on several axes (M-RoPE's t, h, w: a 2-D or 3-D layout of the tokens):
  // position_axes() is how many a token has, 0 when the scheme takes none (a token's position is
  // its index). set_axis_positions() gives positions [n][axes] of tokens pos0..pos0 + n - 1 of the
  // next forward, or null for each at its index on every axis; called before begin_forward(),
  // whose tables then cover the largest, and rotate() turns those tokens by them. Keys are cached
  // turned; the cache, masks and windows stay by index.
  virtual int position_axes() const { return 0; }
  virtual void set_axis_positions(const int* positions, int pos0, int n) { (void)positions, (void)pos0, (void)n; }
  // True when the rotation depends on each position's length class: keys are then cached
  // unrotated and rotated when read, so no cached key is ever stale. (A scheme that encodes by
  // the sequence's length caches them rotated: a change of class re-encodes them all.)
  virtual bool rotates_keys_on_read() const { return false; }
  // Such a scheme may also turn keys for each query at its own length class, so that one
  // forward spans several classes (a prefill past L in one batch, its products as GEMMs):
  // mixed_span(pos, max_n) is how many positions from pos (at most max_n) begin_mixed() can
  // prepare at once, 0 when it cannot (the caller then runs one class per forward). For such a
  // forward over [pos0, pos0 + n), begin_mixed() replaces begin_forward(), and
  // rotate_for_query() turns n_pos head vectors at positions pos0.. as the query at
  // `query_pos`, one of the forward's, sees them: vector (t, h) from src + t*pos_stride +
  // h*src_head_stride into dst + t*pos_stride + h*dst_head_stride (dst may be src); thread-safe.
  virtual int mixed_span(int pos, int max_n) const { (void)pos, (void)max_n; return 0; }
  virtual void begin_mixed(int pos0, int n) { (void)pos0, (void)n; }
  virtual void rotate_for_query(int query_pos, const float* src, float* dst, int pos0, int n_pos, int n_heads,
                                ptrdiff_t pos_stride, ptrdiff_t src_head_stride, ptrdiff_t dst_head_stride) const {
    (void)query_pos, (void)src, (void)dst, (void)pos0, (void)n_pos, (void)n_heads, (void)pos_stride,
        (void)src_head_stride, (void)dst_head_stride;
  }

  // Context shift: cached keys of n_pos positions (laid out as for rotate()) move back by
  // `delta` positions. Bias schemes and NoPE depend on distances only: nothing to do. A cache
  // cannot follow when positions are baked into the token states (learned, sinusoidal):
  // can_shift() is false and the caller re-encodes the tokens instead.
  virtual bool can_shift() const { return true; }
  virtual void shift_keys(float* k, int n_pos, int n_heads, ptrdiff_t pos_stride, ptrdiff_t head_stride,
                          int delta) {
    (void)k, (void)n_pos, (void)n_heads, (void)pos_stride, (void)head_stride, (void)delta;
  }

  // Hook 3. scores[i] += bias(query_pos, key position key0 + i, head) for i in [0, n_keys), in
  // attention layer `layer` (schemes with weights per layer read theirs; the others ignore it).
  virtual bool has_bias() const { return false; }
  virtual void add_bias(float* scores, int layer, int head, int query_pos, int key0, int n_keys) const {
    (void)scores, (void)layer, (void)head, (void)query_pos, (void)key0, (void)n_keys;
  }

  // Hook 4. scores[i] += scale · terms(q, k_{key0+i}, query_pos − key0 − i) for i in [0, n_keys):
  // q is head `head`'s query [head_dim] and `keys` key key0's vector, the next head_dim floats on,
  // as the kernel read them (log-n's factor already on q). Distances only, as for hook 3.
  virtual bool has_relative_terms() const { return false; }
  virtual void add_relative_terms(float* scores, int layer, int head, int query_pos, const float* q, const float* keys,
                                  int key0, int n_keys, float scale) const {
    (void)scores, (void)layer, (void)head, (void)query_pos, (void)q, (void)keys, (void)key0, (void)n_keys, (void)scale;
  }
  // The terms a score sums: the kernel's scale is 1/sqrt(score_terms() · head_dim) (DeBERTa's 3).
  virtual int score_terms() const { return 1; }

  // Hook 5. Forget gates (FoX): out[t][h] = ln f of head h for each of n tokens, from x [n][hidden],
  // the layer's normed input (what q, k and v are projected from). The attention keeps their
  // running sum c_n beside each cached key and adds c_m − c_n to the score of query m, key n.
  virtual bool has_forget_gates() const { return false; }
  virtual void log_forget_gates(float* out, const float* x, int n, int layer) const {
    (void)out, (void)x, (void)n, (void)layer;
  }

  // Hook 6. The weights come from stick-breaking (attention.hpp: stick_breaking_weights), not a
  // softmax of the scores.
  virtual bool stick_breaking() const { return false; }

  // Hook 7. Contextual positions (CoPE): `row` holds one query's scores (q·k · scale, −inf where
  // it does not see the key) over `seen` keys in key order, its own key last; the scheme counts
  // positions from the query back with gates read from those scores and adds each key's
  // position term to its score. q: the query's head as the kernel read it (log-n's factor on it).
  // The kernel calls it once the row is whole (decoding takes the prefill path).
  virtual bool has_contextual_positions() const { return false; }
  virtual void add_contextual_positions(float* row, int seen, int layer, const float* q, float scale) const {
    (void)row, (void)seen, (void)layer, (void)q, (void)scale;
  }
};

// The factor on q·k (and on hook 4's terms): 1/sqrt(score_terms · head_dim).
inline float score_scale(const PositionEncoding& pe, int head_dim) {
  return 1.0f / std::sqrt(float(pe.score_terms() * head_dim));
}

// Hooks 3 and 4 as the kernel applies them to query_pos's scores of keys [key0, key0 + n_keys).
inline void add_position_terms(const PositionEncoding& pe, float* scores, int layer, int head, int query_pos,
                               const float* q, const float* keys, int key0, int n_keys, float scale) {
  if (pe.has_bias()) pe.add_bias(scores, layer, head, query_pos, key0, n_keys);
  if (pe.has_relative_terms()) pe.add_relative_terms(scores, layer, head, query_pos, q, keys, key0, n_keys, scale);
}

// Which hooks a scheme acts through, for the methods of "extend" that only some schemes admit.
enum class SchemeKind {
  None,      // NoPE
  Absolute,  // adds positions to the embeddings (learned, sinusoidal): positions cannot be re-indexed
  Rotary,    // rotates q and k (RoPE and its scalings, xPos)
  Bias,      // biases the scores by distance (ALiBi, T5, KERPLE, FIRE; XL and DeBERTa also read q and k)
};

// A run past a table of `max` positions (max_positions()) in a message: "past the learned
// position table (128 positions); " + `instead` (what to give instead, e.g. "give at most 120"),
// and for a learned table ", or `set position.beyond=clamp` to reuse the last one". `scheme`: the
// scheme's label ("learned", "rope+xpos").
std::string past_position_table(const std::string& scheme, int max, const std::string& instead);

// A scheme's own block of the config, parsed and validated by the scheme's file (one parse
// function registered in src/attention/positions_registry.cpp), which also says what the block means,
// which tensors the scheme adds to the model and how to build its encoder.
class SchemeConfig {
 public:
  virtual ~SchemeConfig() = default;
  virtual const char* type() const = 0;                         // the registry name: "rope", ...
  virtual SchemeKind kind() const = 0;
  virtual nlohmann::json to_json() const = 0;                   // the block, every default filled in
  virtual std::string describe(int head_dim) const = 0;         // one line in words
  // What the weights were trained to depend on: a config override may rescale or extend a
  // scheme but not change this (unless asked to), e.g. "rope", "rope+xpos", "alibi".
  virtual std::string identity() const { return type(); }
  // Positions counted from the content (CoPE): there are none for an "extend" method to move.
  virtual bool positions_from_content() const { return false; }
  // For `pert positions`, whose profile feeds the scheme constant q = k = ones: what that constant
  // input sets where the scheme reads the content (CoPE's gates, FoX's), "" where nothing does.
  virtual std::string profile_note() const { return ""; }
  // A short name for tables and plots: the identity and any scaling, e.g. "rope ntk x4".
  virtual std::string label() const { return identity(); }
  virtual std::vector<ExpectedTensor> tensors(const ModelConfig& c) const { (void)c; return {}; }
  virtual std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const = 0;
};

template <class T>
const T& PositionConfig::as() const {
  const T* block = dynamic_cast<const T*>(scheme.get());
  if (!block) throw Error("the position scheme is '" + type() + "', not the one asked for");
  return *block;
}

// An attention-time method of the config's "extend" block (Self-Extend, ReRoPE, StreamingLLM,
// blockwise attention, log-n): which keys query m sees, at which positions the scheme encodes
// a (query m, key n) pair, and a factor on query m's scores. Each lives in its own file under
// src/attention/extend/, registered once; the attention kernel and the model ask these questions and never
// name a method. Positions are 0-based, n <= m; every function is pure.
//   visible(m, n)   n < sinks()  or  n >= first_key(m)
//   encoded at      (m, n) when n >= near_first(m), else (far_query(m), far_key(n)), but
//                   (farther_query(m), far_key(n)) when n < farther_first(m) (a second far tier:
//                   Dual Chunk Attention's inter-chunk pairs)
//   scores × query_scale(m) · key_scale(n)
// first_key, near_first and farther_first never decrease with m (the kernel's block ranges rely
// on it); farther_first(m) <= near_first(m).
class ExtensionConfig {
 public:
  virtual ~ExtensionConfig() = default;
  virtual const char* type() const = 0;          // the registry name: "self_extend", ...
  virtual nlohmann::json to_json() const = 0;    // the block, every default filled in
  virtual std::string describe() const = 0;      // one line in words

  virtual bool masks() const { return false; }   // first_key or sinks restrict the keys
  virtual int first_key(int m) const { (void)m; return 0; }
  virtual int sinks() const { return 0; }

  virtual bool remaps() const { return false; }  // some pairs are encoded at far positions
  virtual int near_first(int m) const { (void)m; return 0; }
  virtual double far_query(int m) const { return m; }
  virtual double far_key(int n) const { return n; }
  virtual bool far_keys_are_keys() const { return false; }  // far_key(n) == n: the far pass reads the cache's keys
  virtual bool has_farther() const { return false; }        // a second far tier
  virtual int farther_first(int m) const { (void)m; return 0; }
  virtual double farther_query(int m) const { return m; }

  virtual bool scales() const { return false; }
  virtual double query_scale(int m) const { (void)m; return 1.0; }
  virtual double key_scale(int n) const { (void)n; return 1.0; }  // on key n as cached
  virtual bool scales_keys() const { return false; }               // key_scale is not 1 everywhere
};

// The model's methods as the kernel and the model ask them: at most one that masks or remaps
// (`pattern`) and any that scale queries, checked when the config is parsed.
struct Extensions {
  const ExtensionConfig* pattern = nullptr;
  std::vector<const ExtensionConfig*> scales;
  explicit Extensions(const ModelConfig& config);
  double query_scale(int m) const {
    double s = 1.0;
    for (const ExtensionConfig* e : scales) s *= e->query_scale(m);
    return s;
  }
  double key_scale(int n) const {
    double s = 1.0;
    for (const ExtensionConfig* e : scales) s *= e->key_scale(n);
    return s;
  }
  bool scales_keys() const {
    return std::any_of(scales.begin(), scales.end(), [](const ExtensionConfig* e) { return e->scales_keys(); });
  }
};

// The tensors a scheme adds to the model (learned table, t5 bias table).
std::vector<ExpectedTensor> position_tensors(const ModelConfig& config);

// Builds the scheme that `config.position` names.
std::unique_ptr<PositionEncoding> make_position_encoding(const ModelConfig& config, const TensorLookup& tensors);
// ... or the one a layer's `scheme` names (config.layers[i].position).
std::unique_ptr<PositionEncoding> make_position_encoding(const ModelConfig& config, const PositionConfig& scheme,
                                                         const TensorLookup& tensors);

// How a scheme alone weighs distance (the picture in the RoPE, ALiBi and xPos papers): the
// attention logit the kernel computes (q·k·score_scale + bias, and XL's or DeBERTa's terms) for
// q = k = ones before the scheme acts, a query at `query_pos` and keys 0..max_distance back.
// Returns [head][distance]. Schemes that add positions to the embeddings (learned,
// sinusoidal) have no per-head q and k: one row of p(m)·p(n)/√hidden, p the position vectors.
// `layer`: whose weights, for schemes with weights per layer (KERPLE).
std::vector<std::vector<double>> distance_profile(const ModelConfig& config, const TensorLookup& tensors,
                                                  int query_pos, int max_distance, int layer = 0);
// The largest distance and query position a profile is asked for (131,072: Llama 3.1's context):
// the profile holds every key's position vector (positions x hidden floats).
inline constexpr int kMaxProfileDistance = 1 << 17;
// The distance shown when none is asked for: the trained length - 1, within that bound (a config
// may claim 16M).
inline int default_profile_distance(const ModelConfig& config) {
  return config.max_position_embeddings - 1 < kMaxProfileDistance ? config.max_position_embeddings - 1
                                                                   : kMaxProfileDistance;
}

// Formulas exposed for the property tests (RoPE's are in rope.hpp).
std::vector<double> alibi_slopes(int n_heads, double max_bias);
int t5_bucket(int distance, int num_buckets, int max_distance);  // distance = m - n >= 0

}  // namespace pert
