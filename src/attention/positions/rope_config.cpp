// RoPE's config block: parsed and validated here, described and written back as JSON. The
// math is in rope.cpp. HF's rope_theta / rope_scaling / partial_rotary_factor keys arrive
// here already turned into this block (config.cpp's position_from_hf).
#include <cmath>

#include "attention/plugins.hpp"
#include "attention/positions/rope.hpp"

namespace pert {

namespace {

const std::pair<const char*, RopeScalingType> kScalingTypes[] = {
    {"none", RopeScalingType::None},       {"linear", RopeScalingType::Linear}, {"ntk", RopeScalingType::Ntk},
    {"dynamic", RopeScalingType::Dynamic}, {"yarn", RopeScalingType::Yarn},     {"llama3", RopeScalingType::Llama3},
    {"longrope", RopeScalingType::LongRope}};

RopeScalingType scaling_type(const std::string& name, Fields& f) {
  for (const auto& [n, type] : kScalingTypes)
    if (name == n) return type;
  f.fail("type", "'" + name + "' is not one of: " + comma_list(kScalingTypes, [](const auto& entry) { return std::string(entry.first); }));
}

bool positive(double x) { return x > 0; }

// `trained` is L unless the block names its own original_max_position_embeddings.
RopeScaling parse_scaling(Fields& f, const RopeConfig& rope, const PluginContext& context) {
  RopeScaling s;
  const std::string type = f.string("type");
  s.type = scaling_type(type, f);
  if (s.type == RopeScalingType::None) {
    f.reject_unknown("scaling type 'none'");
    return s;
  }
  const auto at_least_one = [](double x) { return x >= 1.0; };
  s.original_max_position = f.positive("original_max_position_embeddings", kMaxCount, context.trained);
  const double L = s.original_max_position;

  if (s.type == RopeScalingType::LongRope) {
    if (L < 2) f.fail("original_max_position_embeddings", "must be at least 2 for longrope (its attention factor divides by ln L)");
    s.factor = f.number("factor", context.model.max_position_embeddings / L, at_least_one, "must be >= 1");
    const size_t pairs = size_t(rope.rotary_dim / 2);
    s.short_factor = f.numbers("short_factor", pairs);
    s.long_factor = f.numbers("long_factor", pairs);
    const double def = s.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(s.factor) / std::log(L));
    s.attention_factor = f.number("attention_factor", def, positive, "must be > 0");
    s.long_attention_factor = s.attention_factor;
    // Phi-3.5-MoE / Phi-3-small: one factor up to L (short_mscale), another beyond (long_mscale).
    if (f.has("short_mscale") || f.has("long_mscale")) {
      if (f.has("attention_factor")) f.fail("short_mscale", "and attention_factor are both set; keep one");
      s.attention_factor = f.number("short_mscale", std::nullopt, positive, "must be > 0");
      s.long_attention_factor = f.number("long_mscale", std::nullopt, positive, "must be > 0");
    }
    const std::string choice = f.string("longrope_choice", "sequence");
    if (choice != "sequence" && choice != "position")
      f.fail("longrope_choice", "must be \"sequence\" (by the whole sequence's length, as transformers) or \"position\" "
                                "(by each position's own), got \"" + choice + "\"");
    s.longrope_choice = choice == "sequence" ? LongRopeChoice::Sequence : LongRopeChoice::Position;
  } else {
    s.factor = f.number("factor", std::nullopt, at_least_one, "must be >= 1");
  }
  if ((s.type == RopeScalingType::Ntk || s.type == RopeScalingType::Dynamic) && rope.rotary_dim < 4)
    f.fail("type", "'" + type + "' needs rotary_dim >= 4 (its exponent is r/(r-2)), got " + std::to_string(rope.rotary_dim));
  if (s.type == RopeScalingType::Yarn) {
    s.beta_fast = f.number("beta_fast", 32.0, positive, "must be > 0");
    s.beta_slow = f.number("beta_slow", 1.0, positive, "must be > 0");
    if (s.beta_fast <= s.beta_slow) f.fail("beta_fast", "must be greater than beta_slow");
    // HF's default: m(s) = 0.1·ln(s) + 1, or m(s, mscale) / m(s, mscale_all_dim) with
    // m(s, k) = 0.1·k·ln(s) + 1 when both are given and non-zero (DeepSeek's configs).
    s.mscale = f.number("mscale", 0.0, [](double x) { return x >= 0; }, "must be >= 0");
    s.mscale_all_dim = f.number("mscale_all_dim", 0.0, [](double x) { return x >= 0; }, "must be >= 0");
    const auto m = [&](double k) { return s.factor <= 1.0 ? 1.0 : 0.1 * k * std::log(s.factor) + 1.0; };
    const double def = s.mscale != 0 && s.mscale_all_dim != 0 ? m(s.mscale) / m(s.mscale_all_dim) : m(1.0);
    s.attention_factor = f.number("attention_factor", def, positive, "must be > 0");
    s.truncate = f.boolean("truncate", true);
  }
  if (s.type == RopeScalingType::Llama3) {
    s.low_freq_factor = f.number("low_freq_factor", 1.0, positive, "must be > 0");
    s.high_freq_factor = f.number("high_freq_factor", 4.0, positive, "must be > 0");
    if (s.high_freq_factor <= s.low_freq_factor) f.fail("high_freq_factor", "must be greater than low_freq_factor");
  }
  f.reject_unknown("scaling type '" + type + "'");
  return s;
}

// M-RoPE's mrope_section [t, h, w] (pairs per axis, summing to rotary_dim/2) and layout.
void parse_mrope(Fields& f, RopeConfig& p) {
  const json* section = f.get("mrope_section");
  if (!section) {
    if (f.boolean("mrope_interleaved", false)) f.fail("mrope_interleaved", "is true, but no mrope_section is given");
    return;
  }
  if (!section->is_array() || section->size() != 3)
    f.fail("mrope_section", "must be a list of three pair counts [t, h, w], got " + json_brief(*section));
  int sum = 0;
  for (const json& n : *section) {
    if (!n.is_number_integer() || n.get<long long>() < 0 || n.get<long long>() > kMaxDim)
      f.fail("mrope_section", "must hold non-negative integers, got " + json_brief(*section));
    p.mrope_section.push_back(n.get<int>());
    sum += p.mrope_section.back();
  }
  const int half = p.rotary_dim / 2;
  if (sum != half)
    f.fail("mrope_section", json_brief(*section) + " sums to " + std::to_string(sum) + ", not the rotary pairs (rotary_dim/2 = " +
                                std::to_string(half) + ")");
  p.mrope_interleaved = f.boolean("mrope_interleaved", false);
  int count[3] = {0, 0, 0};  // interleaved, an axis may run out of pairs before its count
  for (int a : mrope_axes(p)) ++count[a];
  for (int a = 0; a < 3; ++a)
    if (count[a] != p.mrope_section[size_t(a)])
      f.fail("mrope_section", json_brief(*section) + " interleaved gives the axes t, h, w " + std::to_string(count[0]) + ", " +
                                  std::to_string(count[1]) + " and " + std::to_string(count[2]) + " of the " +
                                  std::to_string(half) + " pairs, not its counts");
}

}  // namespace

std::shared_ptr<const SchemeConfig> parse_rope(Fields& f, const PluginContext& context) {
  auto p = std::make_shared<RopeConfig>();
  const int head_dim = context.model.head_dim;
  p->base = f.number("base", 10000.0, [](double x) { return x > 1.0; }, "must be > 1");
  if (f.has("partial_rotary_factor")) {  // only from HF keys (see config.cpp's position_from_hf)
    const double prf = f.number("partial_rotary_factor", {}, [](double x) { return x > 0 && x <= 1; }, "must be in (0, 1]");
    p->rotary_dim = int(head_dim * prf);
  } else {
    p->rotary_dim = f.positive("rotary_dim", kMaxDim, head_dim);
  }
  if (p->rotary_dim % 2)
    f.fail("rotary_dim", "must be even, got " + std::to_string(p->rotary_dim) + " (head_dim " + std::to_string(head_dim) + ")");
  if (p->rotary_dim < 2 || p->rotary_dim > head_dim)
    f.fail("rotary_dim", "must be in [2, head_dim = " + std::to_string(head_dim) + "], got " + std::to_string(p->rotary_dim));
  const std::string layout = f.string("layout", "half");
  if (layout != "half" && layout != "interleaved") f.fail("layout", "must be \"half\" or \"interleaved\", got \"" + layout + "\"");
  p->layout = layout == "half" ? RopeLayout::Half : RopeLayout::Interleaved;
  if (const json* s = f.get("scaling")) {
    if (!s->is_object()) f.fail("scaling", "must be an object, got " + json_brief(*s));
    Fields sf(*s, f.source(), f.path() + "scaling.");
    p->scaling = parse_scaling(sf, *p, context);
  }
  parse_mrope(f, *p);
  if (const json* x = f.get("xpos")) {
    if (!x->is_object()) f.fail("xpos", "must be an object like {\"gamma\": 0.4, \"scale_base\": 512}, got " + json_brief(*x));
    Fields xf(*x, f.source(), f.path() + "xpos.");
    p->xpos.enabled = true;
    p->xpos.gamma = xf.number("gamma", 0.4, positive, "must be > 0");
    p->xpos.scale_base = xf.number("scale_base", 512.0, positive, "must be > 0");
    xf.reject_unknown("xpos");
  }
  if (!p->mrope_section.empty() && (p->xpos.enabled || p->scaling.type == RopeScalingType::Dynamic ||
                                    p->scaling.type == RopeScalingType::LongRope))
    f.fail("mrope_section", std::string("is set together with ") + (p->xpos.enabled ? "xpos" : rope_scaling_name(p->scaling.type)) +
                                ", whose rotation depends on more than a position per pair; M-RoPE runs with a static scaling only");
  return p;
}

std::vector<int> mrope_axes(const RopeConfig& rope) {
  const std::vector<int>& s = rope.mrope_section;
  std::vector<int> axes;
  if (s.size() != 3) return axes;
  const int half = rope.rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    if (rope.mrope_interleaved)  // Qwen3-VL: h on pairs 1, 4, ... below 3·s[1], w on 2, 5, ... below 3·s[2]
      axes.push_back(i % 3 == 1 && i < 3 * s[1] ? 1 : i % 3 == 2 && i < 3 * s[2] ? 2 : 0);
    else
      axes.push_back(i < s[0] ? 0 : i < s[0] + s[1] ? 1 : 2);
  }
  return axes;
}

const char* rope_scaling_name(RopeScalingType type) {
  for (const auto& [name, t] : kScalingTypes)
    if (t == type) return name;
  return "?";
}

json RopeConfig::to_json() const {
  json j = {{"type", type()}, {"base", base}, {"rotary_dim", rotary_dim}, {"layout", layout == RopeLayout::Half ? "half" : "interleaved"}};
  const RopeScaling& s = scaling;
  if (s.type != RopeScalingType::None) {
    json js = {{"type", rope_scaling_name(s.type)}, {"factor", s.factor}, {"original_max_position_embeddings", s.original_max_position}};
    if (s.type == RopeScalingType::Yarn) {
      js["beta_fast"] = s.beta_fast;
      js["beta_slow"] = s.beta_slow;
      if (!s.truncate) js["truncate"] = false;
    }
    if (s.type == RopeScalingType::Yarn || s.type == RopeScalingType::LongRope) js["attention_factor"] = s.attention_factor;
    if (s.type == RopeScalingType::Llama3) {
      js["low_freq_factor"] = s.low_freq_factor;
      js["high_freq_factor"] = s.high_freq_factor;
    }
    if (s.type == RopeScalingType::LongRope) {
      if (s.long_attention_factor != s.attention_factor) js["long_attention_factor"] = s.long_attention_factor;
      js["short_factor"] = s.short_factor;
      js["long_factor"] = s.long_factor;
      js["longrope_choice"] = s.longrope_choice == LongRopeChoice::Sequence ? "sequence" : "position";
    }
    j["scaling"] = js;
  }
  if (xpos.enabled) j["xpos"] = {{"gamma", xpos.gamma}, {"scale_base", xpos.scale_base}};
  if (!mrope_section.empty()) j["mrope_section"] = mrope_section, j["mrope_interleaved"] = mrope_interleaved;
  return j;
}

std::string RopeConfig::label() const {
  const std::string name = identity() + (mrope_section.empty() ? "" : " mrope");
  if (scaling.type == RopeScalingType::None) return name;
  return name + " " + rope_scaling_name(scaling.type) + " x" + number_text(scaling.factor);
}

std::string RopeConfig::describe(int head_dim) const {
  std::string s = "RoPE (Su et al. 2021): " + std::string(layout == RopeLayout::Half ? "half" : "interleaved") +
                  " layout, base " + number_text(base) + ", rotary dim " + std::to_string(rotary_dim) + " of " +
                  std::to_string(head_dim);
  const RopeScaling& sc = scaling;
  const std::string from = " x" + number_text(sc.factor) + " from L = " + std::to_string(sc.original_max_position);
  switch (sc.type) {
    case RopeScalingType::None: break;
    case RopeScalingType::Linear: s += "; linear position interpolation" + from; break;
    case RopeScalingType::Ntk: s += "; NTK-aware base scaling" + from; break;
    case RopeScalingType::Dynamic: s += "; dynamic NTK" + from + ", plain RoPE up to L"; break;
    case RopeScalingType::Yarn:
      s += "; YaRN" + from + " (beta_fast " + number_text(sc.beta_fast) + ", beta_slow " + number_text(sc.beta_slow) +
           ", attention factor " + number_text(sc.attention_factor) + ")";
      break;
    case RopeScalingType::Llama3:
      s += "; Llama 3" + from + " (low_freq_factor " + number_text(sc.low_freq_factor) + ", high_freq_factor " +
           number_text(sc.high_freq_factor) + ")";
      break;
    case RopeScalingType::LongRope:
      s += "; LongRoPE" + from + " (short factors up to L, long beyond, by " +
           (sc.longrope_choice == LongRopeChoice::Sequence ? "the whole sequence's length" : "each position's own") +
           "; attention factor " + number_text(sc.attention_factor) + ")";
      break;
  }
  if (xpos.enabled) s += "; xPos (gamma " + number_text(xpos.gamma) + ", scale_base " + number_text(xpos.scale_base) + ")";
  if (!mrope_section.empty())
    s += "; M-RoPE: pairs by axis t/h/w " + std::to_string(mrope_section[0]) + "/" + std::to_string(mrope_section[1]) + "/" +
         std::to_string(mrope_section[2]) + (mrope_interleaved ? ", interleaved" : ", contiguous") +
         " (text alone: plain RoPE)";
  return s;
}

}  // namespace pert
