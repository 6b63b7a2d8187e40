// Decoding allocates nothing per token: every family model in models/ (F32 and BF16; rope also
// Q8 with a bf16 and a q8 KV cache) runs the
// generate loop (sample with a repetition penalty, context shift when full, one-token forward)
// and every heap allocation made by anything in the process after a warm-up is counted, through
// libgomp and OpenBLAS too, but for the re-encoding prefill of schemes that cannot shift. A one-thread OpenMP team per region turned serial by an `if` clause
// (36 per token) went unseen by a malloc-only count: aligned allocations are counted here.
//   pert_alloc_test MODELS_DIR [EXTEND_CONFIGS_DIR]
// With EXTEND_CONFIGS_DIR, models/rope also runs under each of its files (configs/extend: the
// far pass's queries and keys, masks, sinks, log-n).
// Plain build: the allocation functions are interposed here and forward to glibc's. Sanitizer
// build: ASan owns them, so its allocation hook counts instead.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/model.hpp"
#include "pert/sampler.hpp"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
bool trap = false;  // PERT_ALLOC_TRAP=1: stop at the first counted allocation, for a debugger's backtrace
inline void count() {
  if (!counting.load(std::memory_order_relaxed)) return;
  if (trap) __builtin_trap();
  allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*)(const volatile void*, size_t),
                                                         void (*)(const volatile void*));
namespace {
void on_malloc(const volatile void*, size_t) { count(); }
void on_free(const volatile void*) {}
[[maybe_unused]] const bool hooked = (__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free), true);
}  // namespace
#else
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* memalign(size_t alignment, size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
  count();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
  count();
  void* p = __libc_memalign(alignment, n);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}
#endif

namespace {

// Allocations during `steps` tokens of the generate loop after `warmup` tokens.
long decode_allocations(const pert::Model& model, int n_ctx, int warmup, int steps, pert::CacheType cache) {
  pert::InferenceState state(model, n_ctx, 512, 1, cache);
  pert::SamplerParams params;
  params.repeat_penalty = 1.3f;
  params.seed = 7;
  pert::Sampler sampler(params);
  std::vector<float> logits(size_t(state.vocab_size()));
  std::vector<int> context = {1, 2, 3, 4, 5};
  std::vector<int> history = context;
  history.reserve(size_t(warmup + steps) + context.size());
  context.reserve(size_t(n_ctx));
  state.forward(context.data(), int(context.size()), 0, logits.data(), false);
  for (int i = 0; i < warmup + steps; ++i) {
    counting = i >= warmup;
    const int next = sampler.sample(logits.data(), state.vocab_size(), history);
    history.push_back(next);
    if (state.n_past() == n_ctx) {  // as generate does, keeping nothing
      const int n_discard = state.n_past() / 2;
      context.erase(context.begin(), context.begin() + n_discard);
      if (!state.shift(0, n_discard)) {  // re-encoding is a prefill: OpenBLAS's threaded sgemm mallocs per call
        counting = false;
        state.forward(context.data(), int(context.size()), 0, logits.data(), false);
        counting = true;
      }
    }
    state.forward(&next, 1, state.n_past(), logits.data(), false);
    context.push_back(next);
  }
  counting = false;
  return allocations.exchange(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: pert_alloc_test MODELS_DIR [EXTEND_CONFIGS_DIR]\n");
    return 2;
  }
  trap = std::getenv("PERT_ALLOC_TRAP") != nullptr;
  const int n_ctx = 96, warmup = 2 * n_ctx, steps = 4 * n_ctx;  // warm-up past the first shift
  int failures = 0, runs = 0;
  auto run = [&](const std::string& name, const pert::Model& model, pert::CacheType cache = pert::CacheType::F32) {
    const long n = decode_allocations(model, n_ctx, warmup, steps, cache);
    std::printf("%-40s %-4s %-4s cache: %ld allocations over %d tokens (%d context shifts)\n", name.c_str(),
                pert::weight_type_name(model.weight_type()), pert::cache_type_name(cache), n, steps, steps / (n_ctx / 2));
    failures += n != 0;
    ++runs;
  };
  try {
    for (const auto& entry : std::filesystem::directory_iterator(argv[1])) {
      if (!std::filesystem::exists(entry.path() / "model.safetensors")) continue;
      for (pert::WeightType type : {pert::WeightType::F32, pert::WeightType::BF16}) {
        run(entry.path().filename().string(), *pert::Model::load(entry.path(), {}, type));
      }
      if (entry.path().filename() == "rope")  // a narrower cache: decoding, and shifting through its rows
        for (pert::CacheType cache : {pert::CacheType::BF16, pert::CacheType::Q8})
          run("rope", *pert::Model::load(entry.path(), {}, pert::WeightType::Q8), cache);
    }
    if (argc == 3)
      for (const auto& entry : std::filesystem::directory_iterator(argv[2])) {
        // Windows of 24 (L = 128 would exceed the 96-position context) so masks and far pairs act
        // (DCA: chunk_size 24 with local_size 16, chunks of 8).
        const nlohmann::json patch = pert::read_json_file(entry.path());
        pert::ConfigOverrides small{{entry.path()}, {}};
        const nlohmann::json extend = patch.value("extend", nlohmann::json::object());
        for (const auto& [method, fields] : extend.items())
          if (!fields.is_null())
            small.sets.push_back("extend." + method + "." +
                                 (method == "blockwise" ? "block" : method == "logn" ? "trained"
                                  : method == "dca"       ? "chunk_size"
                                                          : "window") +
                                 "=24");
        run("rope + " + entry.path().filename().string(),
            *pert::Model::load(std::filesystem::path(argv[1]) / "rope", small, pert::WeightType::F32));
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pert_alloc_test: %s\n", e.what());
    return 1;
  }
  if (runs == 0) {
    std::fprintf(stderr, "pert_alloc_test: no model directories in %s\n", argv[1]);
    return 1;
  }
  if (failures) std::fprintf(stderr, "pert_alloc_test: %d of %d runs allocated while decoding\n", failures, runs);
  return failures ? 1 : 0;
}
