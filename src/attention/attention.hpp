// Attention: where each query looks and how positions enter its scores. One unit owns it all
// (src/attention/): the K/V caches and the far pass's keys, when keys are rotated (as stored, or
// on every read for length-dependent schemes), log-n's query scale, the context shift and the
// kernel. The positional scheme (positions.hpp, src/attention/positions/) and the "extend" methods
// (src/attention/extend/) are its plug-ins: it asks them questions and never names one.
//
//   Attention   per inference state: the caches and the steps of one layer (attention.cpp)
//   attention() the kernel: scores, mask and bias, softmax, weighted sum (kernel.cpp)
//   KvCache     the cache's storage in F32, BF16, F16 or Q8 (kv_cache.hpp, kv_cache.cpp)
#pragma once
#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "attention/kv_cache.hpp"
#include "pert/config.hpp"
#include "pert/positions.hpp"

namespace pert {

class AttentionStats;

// Causal multi-head attention for T queries at positions pos0..pos0+T-1 over keys/values
// 0..pos0+T-1, grouped-query: query head h reads kv head h / (n_heads / n_kv_heads). With a
// sliding window W the query at m sees only keys m − W < n <= m. An "extend" method (`pattern`,
// positions.hpp) may narrow the keys further (first_key), keep sinks, and have pairs n < near(m)
// scored from the far queries and keys (q_far · keys_far) instead: the kernel never names it.
struct AttentionShape {
  int T, pos0;
  int n_heads, n_kv_heads, head_dim;
  ptrdiff_t kv_head_stride;  // floats between kv heads in the cache (capacity × head_dim)
  int layer = 0;             // which layer's bias weights (schemes with weights per layer)
  int window = 0;            // 0: every earlier key
  int chunk = 0;             // chunked local: keys from ⌊m/chunk⌋·chunk on; 0: none
  float softcap = 0.0f;      // q·k·scale → cap·tanh(·/cap) before the mask and bias (Gemma 2); 0: none
  // gpt-oss's learned sink logit per head, [n_heads]: a column of the softmax that no key owns,
  // joined after the scale, soft-cap, mask and bias (as HF's eager attention) and then dropped,
  // so a query's weights e^(s_j − M) / (Σ_k e^(s_k − M) + e^(sink_h − M)), M the largest of its
  // scores and the sink, sum to less than 1. Null: none. (Not StreamingLLM's kept first keys,
  // the pattern's sinks.)
  const float* sink_logits = nullptr;
  // A cache that keeps only the last `ring` positions (local layers): position n at row n mod
  // ring; 0: at row n. The kernel splits its key ranges where the rows wrap.
  int ring = 0;
  const ExtensionConfig* pattern = nullptr;  // the method that masks or remaps; null: none
  const float* q_far = nullptr;  // like q: the queries at far_query(m), when the pattern remaps
  const float* q_farther = nullptr;  // like q: at farther_query(m), for pairs n < farther_first(m)
  KvRows keys_far = {};          // like keys: the keys at far_key(n) (the keys themselves when far_keys_are_keys)
  // Decoding (T = 1) with keys cached unrotated (a length-dependent scheme): each block of keys
  // is rotated at its positions as it is read, in the thread's scratch, instead of every key
  // being rotated into a copy first (rotate_keys needs the scratch's widened slots); so are
  // the far keys (keys_far then the unrotated cache too), at far_key_pos[n] (null: at n).
  bool rotate_keys = false;
  const double* far_key_pos = nullptr;
  // Queries of several length classes (a prefill past L under such a scheme): queries come
  // rotated, and each turns the cached keys it reads at its own class (rotate_for_query).
  bool turn_per_query = false;
  // Statistics of every query's weights (attention_stats.hpp), summed as the kernel goes; null:
  // none. Only the prefill path sums them (a single query too), so never with turn_per_query.
  AttentionStats* stats = nullptr;
  // FoX's forget gates (PositionEncoding hook 5): the running sums c of their logs for this
  // sequence and layer, [n_heads][decay_stride] by cache row (as the keys: n mod ring in a
  // ring); the kernel adds c_m − c_n to the score of query m, key n, where the scheme's bias
  // goes. Null: none.
  const double* decay = nullptr;
  ptrdiff_t decay_stride = 0;
};
// q, out: [T][n_heads][head_dim]; keys, values: [n_kv_heads][capacity][head_dim] rows in any
// CacheType: prefill widens a narrower cache's rows of each block's key ranges, decoding reads
// them in registers (or widens each block of keys, for schemes whose terms read them).
// Scores are  q·k · scale + bias(scheme), then softmax (with the head's sink logit, if any), then
// the weighted sum of values.
// Prefill works per (head, block of kQueryBlock queries); decoding (T = 1) per (head, block of
// kKeyBlock keys), each block's softmax partial (max, sum, unnormalised output) merged at the
// end (split-K, as flash-decoding), so a long cache spreads over all threads whatever the heads.
inline constexpr int kQueryBlock = 64;
inline constexpr int kKeyBlock = 256;
inline constexpr int kTurnTile = 16, kTurnKeys = 64;  // turn_per_query: queries per task, keys per block

// Everything the kernel writes besides its output, sized once for a context of n_ctx positions;
// `far_passes`: room for one score block more per far tier (a pattern that remaps: 1 or 2).
// `narrow`: room to widen keys, values (and far keys) from a narrower cache, per thread: a
// prefill block's key ranges (up to n_ctx rows) or a decoding block's kKeyBlock rows;
// `rotate_keys` (keys cached unrotated): room for a decoding block's keys rotated as read
// (AttentionShape::rotate_keys), and for a block of keys turned per query (turn_per_query).
struct AttentionScratch {
  AttentionScratch(int n_heads, int head_dim, int n_ctx, int far_passes = 0, bool narrow = false, bool rotate_keys = false);
  void fit_threads();  // grows `scores` (and `widened`) when the thread count was raised since
  size_t block;                // kQueryBlock·n_ctx: one block of scores
  size_t per_thread;           // block × (1 + far_passes)
  size_t widened_rows;         // rows per slot: max(n_ctx, kKeyBlock) with `narrow`, kKeyBlock with `rotate_keys`, else 0
  size_t widened_per_thread;   // (2 + far) slots of widened_rows × head_dim
  std::vector<float> scores;   // [threads][per_thread]
  std::vector<float> widened;  // [threads][keys, values, far keys][widened_rows][head_dim]
  size_t turning_per_thread;   // rotate_keys: the turn_per_query kernel's floats per thread
  std::vector<float> turning;  // [threads][turning_per_thread]
  std::vector<float> partials; // [n_heads][⌈n_ctx/kKeyBlock⌉ + 1][head_dim + 2]: output, max, sum
};
void attention(float* out, const float* q, const KvRows& keys, const KvRows& values, const AttentionShape& shape,
               float scale, const PositionEncoding& position, AttentionScratch& scratch);
// Stick-breaking's weights (PositionEncoding hook 6, positions/stick_breaking.cpp) in place of a
// softmax: `row` holds one query's scores over `seen` keys, −inf where masked, its own key last.
void stick_breaking_weights(float* row, int seen);


// The attention of the layers of one inference state (model.hpp) that share one scheme
// (`layers`, config.layers[i].position): `n_seq` sequences in step, each with a cache of `n_ctx`
// positions per layer and kv head, and up to `n_batch` new positions per step. The caches and
// buffers are sized here, once; layer() allocates nothing.
class Attention {
 public:
  Attention(const ModelConfig& config, PositionEncoding& position, std::vector<int> layers, int n_ctx, int n_batch,
            int n_seq, CacheType cache_type);
  ~Attention();

  // How many positions from pos (at most max_n) one step may take: of one length class, or of
  // several where the scheme turns keys per query (PositionEncoding::mixed_span) and no far
  // pass needs the keys of one class.
  int span(int pos, int max_n) const;

  // Before each step of n positions from pos0 (a span): the scheme's tables for it
  // (PositionEncoding::begin_forward, or begin_mixed for several length classes). Units that
  // share one encoding (same scheme, other spans) let the first prepare it: prepare_position.
  void begin(int pos0, int n, bool prepare_position = true);

  // Layer `layer` of sequence `seq` for the step's positions: q [n][n_heads·head_dim] and
  // k [n][n_kv_heads·head_dim] as projected (rotated and scaled here, in place), v likewise;
  // the keys and values join the cache, and out [n][n_heads·head_dim] gets each query's mix of
  // the values it sees.
  // `sink_logits`: the layer's learned sink logit per head (AttentionShape::sink_logits), or null.
  // `x` [n][hidden]: the layer's normed input, which a scheme with forget gates reads (hook 5).
  void layer(int seq, int layer, float* q, float* k, const float* v, float* out, const float* sink_logits = nullptr,
             const float* x = nullptr);

  // The first key the query at m reads in this unit's layers (the lowest over them): m − W + 1
  // with a window W, ⌊m/C⌋·C with a chunk C (the later of the two with both); 0 for every key.
  // It never decreases with m, so a step reads from its first query's on.
  int first_key(int m) const;
  // The earliest position after 0 that a step may start from (a rewind, InferenceState::forward):
  // a ring keeps only its last positions, [oldest_, n_past), and a step from m reads from
  // first_key(m) on. 0 when every earlier position is still held.
  int earliest_start() const;
  int span() const { return span_; }      // how far back this unit's queries see (−1: every key)
  int ring() const { return ring_; }      // positions a ring keeps (0: no ring)

  // Context shift (InferenceState::shift) of the n_past cached positions; can_shift() false
  // when the positions cannot move (then shift() is not called).
  bool can_shift() const;
  void shift(int n_keep, int n_discard, int n_past);

  // Sums the statistics of every query's weights into `stats` from the next step on (null: stop).
  // Meanwhile a step spans one length class and a single query takes the prefill path, which
  // sums them: the same weights, more slowly where a scheme turns keys per query.
  void observe(AttentionStats* stats) { stats_ = stats; }

  CacheType cache_type() const { return k_cache_.type(); }
  size_t cache_bytes() const { return k_cache_.bytes() + v_cache_.bytes() + k_far_cache_.bytes(); }
  void fit_threads();  // the kernel's scratch, after the thread count was raised

 private:
  size_t layer_row(int seq, int layer) const;  // the first cache row of (seq, layer)
  void scale_keys(float* k) const;
  void far_queries_and_keys(float* q, const float* k, float* q_far, float* q_farther, size_t row0);
  void store(const float* k, const float* v, size_t row0);
  void scale_queries(float* q, float* q_far, float* q_farther, int layer) const;
  const double* forget_gates(const float* x, int seq, int layer);
  KvRows keys_for_step(size_t row0, std::vector<float>& buffer, const KvCache& cache, const double* far_positions);

  const ModelConfig& c_;
  PositionEncoding& position_;
  std::vector<int> local_;      // [model layer]: its index among this unit's layers, -1 if not one
  Extensions extend_;
  bool far_ = false;            // the pattern remaps: a far pass with its own queries (and keys)
  bool farther_ = false;        // ... and a second far tier, its own queries too (Dual Chunk Attention)
  bool far_key_cache_ = false;  // ... whose keys are cached apart (static rotation)
  bool far_keys_whole_ = false; // ... whose keys all stand at whole positions
  bool narrow_ = false;         // the cache is not F32 (shift re-rotates it through shift_rows_)
  // MLA (mla.hpp): the values are the cached keys' rows, no V cache; apart when a method scales
  // keys (the values must not be scaled with them)
  bool values_in_keys_ = false;
  int n_ctx_, n_batch_, n_seq_;
  // Positions the cache keeps per (seq, layer, kv head): n_ctx, or for layers that all see a
  // bounded span (windows, chunks), that span and a step's positions, in a ring (`ring_`).
  int rows_ = 0, ring_ = 0;
  int span_ = -1;               // the widest span of this unit's layers (LayerAttention::span)
  int oldest_ = 0;              // a ring's oldest position still held: it holds [oldest_, n_past)
  int pos0_ = 0, n_ = 0;        // the step begin() announced
  bool mixed_ = false;          // ... spans several length classes
  float scale_ = 1.0f;          // on q·k: 1/sqrt(score terms · head_dim)
  AttentionStats* stats_ = nullptr;  // observe()

  int n_local_ = 0;                    // the layers this unit serves
  KvCache k_cache_, v_cache_;          // [seq][local layer][kv_head][rows_] rows of head_dim (v_cache_ empty: values_in_keys_)
  std::vector<float> keys_read_;       // [kv_head][n_ctx][head_dim]: keys rotated when read
  std::vector<float> shift_rows_;      // [n_ctx][head_dim]: one kv head's keys re-rotated by shift() (narrow_ only)
  // The far pass (an "extend" pattern that remaps; empty otherwise):
  std::vector<float> q_far_;           // [n_batch][n_heads·head_dim]: queries at far_query(m)
  std::vector<float> k_far_;           // [n_batch][n_kv_heads·head_dim]: new keys at far_key(n)
  KvCache k_far_cache_;                // like k_cache_: keys at far_key(n), static rotations
  std::vector<float> keys_far_read_;   // like keys_read_: keys at far_key(n), length-dependent rotations
  std::vector<double> far_query_pos_;  // [n_batch]
  std::vector<float> q_farther_;       // [n_batch][n_heads·head_dim]: queries at farther_query(m)
  std::vector<double> farther_query_pos_;  // [n_batch]
  std::vector<double> far_key_pos_;    // [n_ctx]: far_key(n) for every slot
  // FoX (hook 5; empty otherwise): beside each cached key, the running sum of its head's log
  // forget gates, c_n = Σ_{l<=n} ln f_l, in double (it only falls, and c_m − c_n must stay exact far on)
  std::vector<double> decay_;          // [seq][local layer][n_heads][rows_]
  std::vector<float> log_gates_;       // [n_batch][n_heads]: this step's ln f
  std::unique_ptr<AttentionScratch> scratch_;
};

}  // namespace pert
