// distance_profile: the scheme's own hooks applied to constant vectors, so the picture is
// drawn by the code that runs the model; an "extend" method's far positions, mask (keys the
// query does not see: -inf) and query factor included. Where positions come from the content
// the constant content sets them: FoX's forget gates read a zero input (each gate its bias,
// σ(b): the decay the gate starts from), CoPE's gates read the constant scores (every key
// counts σ(q·k · scale)).
#include <algorithm>
#include <cmath>
#include <limits>

#include "pert/error.hpp"
#include "pert/memory.hpp"
#include "pert/positions.hpp"

namespace pert {

std::vector<std::vector<double>> distance_profile(const ModelConfig& c, const TensorLookup& tensors, int query_pos,
                                                  int max_distance, int layer) {
  if (query_pos < 0 || query_pos >= std::numeric_limits<int>::max() || max_distance < 0 || max_distance > query_pos)
    throw Error("`max_distance` " + std::to_string(max_distance) + " and `query_pos` " + std::to_string(query_pos) +
                ": need 0 <= distance <= query position < 2^31 - 1");
  const int n_keys = query_pos + 1, hd = c.head_dim, d = c.hidden_size;
  // [n_keys][d] position vectors, or [n_keys][hd] keys twice (and far ones), and the rows out.
  // Position vectors [n_keys][d], or keys (and far keys) [n_keys][hd] with the scheme's cos,
  // sin and scale tables; rows of doubles out.
  require_memory(4.0 * n_keys * (std::max(double(d), 4.0 * hd) + 2.0 * hd) + 8.0 * c.n_heads * (max_distance + 1.0),
                 "`query_pos` " + std::to_string(query_pos) + " (a profile over " + std::to_string(n_keys) + " keys)",
                 "; pass a smaller `query_pos` or `max_distance`");
  if (layer < 0 || layer >= int(c.layers.size()))
    throw Error("positions: layer " + std::to_string(layer) + " is not one of the model's " + std::to_string(c.layers.size()));
  const LayerAttention& l = c.layers[size_t(layer)];  // its scheme, window, chunk and temperature
  std::unique_ptr<PositionEncoding> pe = make_position_encoding(c, l.position, tensors);
  std::vector<std::vector<double>> out;
  const Extensions extend(c);
  const ExtensionConfig* pattern = extend.pattern;
  const double query_scale = extend.query_scale(query_pos) * l.query_temperature(query_pos);
  int first_seen = l.window > 0 ? query_pos - l.window + 1 : 0;  // the layer's own span
  if (l.chunk > 0) first_seen = std::max(first_seen, query_pos / l.chunk * l.chunk);
  auto hidden = [&](int n) {  // key n is not seen by the query
    return (pattern && pattern->masks() && n >= pattern->sinks() && n < pattern->first_key(query_pos)) || n < first_seen;
  };
  // CoPE's gates read the scores as the kernel has them: the query's factor on q (so on both
  // terms), the mask before the count. Elsewhere the factor and the mask come last.
  const bool contextual = pe->has_contextual_positions();
  // row[delta]: the factor, FoX's decay (per delta; after the factor, as the kernel adds it), the mask
  auto finish = [&](std::vector<double>& row, float log_gate = 0.0f) {
    for (int delta = 0; delta < int(row.size()); ++delta) {
      const int n = query_pos - delta;
      if (!contextual) row[size_t(delta)] *= query_scale * extend.key_scale(n);
      row[size_t(delta)] += double(delta) * double(log_gate);
      if (hidden(n)) row[size_t(delta)] = -std::numeric_limits<double>::infinity();
    }
    for (double v : row)
      if (std::isnan(v) || v == std::numeric_limits<double>::infinity())  // -inf is a masked key
        throw Error("positions: non-finite attention logit at query position " + std::to_string(query_pos) +
                    " (the config's values overflow float)");
    out.push_back(row);
  };

  // Hook 1: positions added to (zero) embeddings; what they add is the position vector.
  std::vector<float> p(size_t(n_keys) * size_t(d), 0.0f);  // [n_keys][d]
  pe->begin_forward(pe->length_class(query_pos), 0, n_keys);
  pe->add_to_embeddings(p.data(), 0, n_keys);
  if (std::any_of(p.begin(), p.end(), [](float v) { return v != 0.0f; })) {
    const float* q = &p[size_t(query_pos) * d];
    std::vector<double> row;
    for (int delta = 0; delta <= max_distance; ++delta) {
      const float* k = &p[size_t(query_pos - delta) * d];
      double dot = 0;
      for (int i = 0; i < d; ++i) dot += double(q[i]) * k[i];
      row.push_back(dot / std::sqrt(double(d)));
    }
    finish(row);
    return out;
  }

  // Hooks 2 and 3: rotated ones, then the bias, per head, exactly as the attention kernel; pairs
  // the pattern places at far positions from ones rotated there.
  std::vector<float> q(size_t(hd), contextual ? float(query_scale) : 1.0f);  // [hd]
  std::vector<float> k(size_t(n_keys) * size_t(hd), 1.0f);                   // [n_keys][hd]
  std::vector<float> q_far = q, k_far = k, q_farther = q;
  const bool far = pattern && pattern->remaps();
  const int near = far ? std::max(0, pattern->near_first(query_pos)) : 0;  // keys below are far
  const int farther = far ? std::max(0, pattern->farther_first(query_pos)) : 0;  // ... and below that farther
  if (pe->rotates()) {
    pe->rotate(q.data(), query_pos, 1, 1, hd, hd, true);
    pe->rotate(k.data(), 0, n_keys, 1, hd, hd, false);
    if (far) {
      const double at = pattern->far_query(query_pos);
      std::vector<double> key_at;
      for (int n = 0; n < n_keys; ++n) key_at.push_back(pattern->far_key(n));
      pe->rotate_at(q_far.data(), &at, 1, 1, hd, hd);
      const double farther_at = pattern->farther_query(query_pos);
      pe->rotate_at(q_farther.data(), &farther_at, 1, 1, hd, hd);
      pe->rotate_at(k_far.data(), key_at.data(), n_keys, 1, hd, hd);
    }
  }
  std::vector<float> scores(static_cast<size_t>(n_keys));  // [n_keys]
  const float scale = c.attention_scale > 0 ? float(c.attention_scale) : score_scale(*pe, hd);
  // FoX: ln f per head from a zero input, so a key delta back loses delta · ln σ(b_h)
  std::vector<float> log_gate(size_t(c.n_heads), 0.0f);  // [n_heads]
  if (pe->has_forget_gates()) pe->log_forget_gates(log_gate.data(), std::vector<float>(size_t(d), 0.0f).data(), 1, layer);
  for (int h = 0; h < c.n_heads; ++h) {
    for (int j = 0; j < n_keys; ++j) {
      const bool is_far = j < near;
      const float* qv = j < farther ? q_farther.data() : is_far ? q_far.data() : q.data();
      const float* kv = (is_far ? k_far.data() : k.data()) + size_t(j) * hd;
      double dot = 0;
      for (int i = 0; i < hd; ++i) dot += double(qv[size_t(i)]) * kv[i];
      scores[size_t(j)] = float(dot * scale);
    }
    if (c.attn_softcap > 0)  // Gemma 2's cap, as the kernel applies it (ops.hpp: softcap)
      for (float& s : scores) s = float(c.attn_softcap * std::tanh(s / c.attn_softcap));
    if (near > 0)
      add_position_terms(*pe, scores.data(), layer, h, int(pattern->far_query(query_pos)), q_far.data(), k_far.data(), 0,
                         near, scale);
    add_position_terms(*pe, scores.data() + near, layer, h, query_pos, q.data(), k.data() + size_t(near) * hd, near,
                       n_keys - near, scale);
    if (contextual) {
      for (int n = 0; n < n_keys; ++n)
        if (hidden(n)) scores[size_t(n)] = -std::numeric_limits<float>::infinity();
      pe->add_contextual_positions(scores.data(), n_keys, layer, q.data(), scale);
    }
    std::vector<double> row;
    for (int delta = 0; delta <= max_distance; ++delta) row.push_back(scores[size_t(query_pos - delta)]);
    finish(row, log_gate[size_t(h)]);
  }
  return out;
}

}  // namespace pert
