// distance_profile: the scheme's own hooks applied to constant vectors, so the picture is
// drawn by the code that runs the model.
#include <algorithm>
#include <cmath>

#include "pert/error.hpp"
#include "pert/positions.hpp"

namespace pert {

std::vector<std::vector<double>> distance_profile(const ModelConfig& c, const TensorLookup& tensors, int query_pos,
                                                  int max_distance) {
  if (query_pos < 0 || max_distance < 0 || max_distance > query_pos)
    throw Error("distance profile: need 0 <= max_distance <= query position, got " + std::to_string(max_distance) +
                " and " + std::to_string(query_pos));
  std::unique_ptr<PositionEncoding> pe = make_position_encoding(c, tensors);
  const int n_keys = query_pos + 1, hd = c.head_dim, d = c.hidden_size;
  std::vector<std::vector<double>> out;

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
    out.push_back(row);
    return out;
  }

  // Hooks 2 and 3: rotated ones, then the bias, per head, exactly as the attention kernel.
  std::vector<float> q(size_t(hd), 1.0f), k(size_t(n_keys) * size_t(hd), 1.0f);  // [hd], [n_keys][hd]
  if (pe->rotates()) {
    pe->rotate(q.data(), query_pos, 1, 1, hd, hd, true);
    pe->rotate(k.data(), 0, n_keys, 1, hd, hd, false);
  }
  std::vector<float> scores(static_cast<size_t>(n_keys));  // [n_keys]
  for (int h = 0; h < c.n_heads; ++h) {
    for (int j = 0; j < n_keys; ++j) {
      double dot = 0;
      for (int i = 0; i < hd; ++i) dot += double(q[size_t(i)]) * k[size_t(j) * hd + i];
      scores[size_t(j)] = float(dot / std::sqrt(double(hd)));
    }
    if (pe->has_bias()) pe->add_bias(scores.data(), h, query_pos, 0, n_keys);
    std::vector<double> row;
    for (int delta = 0; delta <= max_distance; ++delta) row.push_back(scores[size_t(query_pos - delta)]);
    out.push_back(row);
  }
  return out;
}

}  // namespace pert
