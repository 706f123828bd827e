// Recursive least squares with exponential forgetting, in normalised units.
//
// Why normalised: the raw features span 1 (intercept) to ~10^6 (KV tokens) and the targets
// are milliseconds, so raw RLS would be ill-conditioned and a single prior covariance could
// not mean "prior_weight samples" in every direction. Each feature is divided by a reference
// scale (tokens: 1024; batch: 32; KV tokens: 65536) and the target by the seed's prediction at
// the reference point, so every coefficient and sample is O(1) and P0 = I / prior_weight.
//
// Anti-windup: with forgetting, P grows without bound along directions the data never
// excites (e.g. batch always 1); its trace is capped at the prior's so a later sample in that
// direction cannot swing the estimate arbitrarily.
#include "fleet/rate_learner.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "engine/step_time.h"

namespace kvroute::fleet {
namespace {

constexpr double kTokenScale = 1024;
constexpr double kBatchScale = 32;
constexpr double kKvScale = 65536;

template <std::size_t N>
using Vec = std::array<double, N>;
template <std::size_t N>
using Mat = std::array<std::array<double, N>, N>;

// Solves A x = b (A symmetric positive definite for our uses) by Gaussian elimination with
// partial pivoting; false if singular.
template <std::size_t N>
bool Solve(Mat<N> a, Vec<N> b, Vec<N>& x) {
  for (std::size_t col = 0; col < N; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < N; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (std::abs(a[pivot][col]) < 1e-300) return false;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (std::size_t r = col + 1; r < N; ++r) {
      double f = a[r][col] / a[col][col];
      for (std::size_t k = col; k < N; ++k) a[r][k] -= f * a[col][k];
      b[r] -= f * b[col];
    }
  }
  for (std::size_t i = N; i-- > 0;) {
    double s = b[i];
    for (std::size_t k = i + 1; k < N; ++k) s -= a[i][k] * x[k];
    x[i] = s / a[i][i];
  }
  return true;
}

// Ordinary least squares of y on rows x (normal equations).
template <std::size_t N>
bool LeastSquares(const std::vector<Vec<N>>& xs, const std::vector<double>& ys, Vec<N>& out) {
  Mat<N> a{};
  Vec<N> b{};
  for (std::size_t s = 0; s < xs.size(); ++s) {
    for (std::size_t i = 0; i < N; ++i) {
      b[i] += xs[s][i] * ys[s];
      for (std::size_t j = 0; j < N; ++j) a[i][j] += xs[s][i] * xs[s][j];
    }
  }
  return Solve<N>(a, b, out);
}

// One RLS estimator of dimension N in normalised units.
template <std::size_t N>
struct Rls {
  Vec<N> theta{};
  Mat<N> p{};
  double p_trace_cap = 0;
  std::uint64_t samples = 0;

  void Reset(const Vec<N>& seed, double prior_weight) {
    theta = seed;
    p = {};
    for (std::size_t i = 0; i < N; ++i) p[i][i] = 1.0 / prior_weight;
    p_trace_cap = N / prior_weight;
    samples = 0;
  }
  double Predict(const Vec<N>& x) const {
    double s = 0;
    for (std::size_t i = 0; i < N; ++i) s += theta[i] * x[i];
    return s;
  }
  // Returns false when the step was not a number (a covariance that lost definiteness, an
  // overflow): the caller then restarts this estimator from its seed, so a degenerate run of
  // data can cost what was learned but never leaves a NaN or infinite rate behind.
  bool Update(const Vec<N>& x, double y, const RateLearnerOptions& o, const Vec<N>& lo,
              const Vec<N>& hi) {
    double pred = Predict(x);
    double residual = y - pred;
    // Huber-style clip relative to the current prediction: bounded influence per sample.
    double bound = o.outlier_clip * std::max(std::abs(pred), 1e-3);
    residual = std::clamp(residual, -bound, bound);
    Vec<N> px{};
    for (std::size_t i = 0; i < N; ++i) {
      for (std::size_t j = 0; j < N; ++j) px[i] += p[i][j] * x[j];
    }
    double denom = o.forgetting;
    for (std::size_t i = 0; i < N; ++i) denom += x[i] * px[i];
    if (!std::isfinite(denom) || !(denom >= o.forgetting * 0.5)) return false;
    Vec<N> k{};
    for (std::size_t i = 0; i < N; ++i) k[i] = px[i] / denom;
    Vec<N> next{};
    for (std::size_t i = 0; i < N; ++i) {
      next[i] = std::clamp(theta[i] + k[i] * residual, lo[i], hi[i]);
    }
    // Clamping breaks RLS: the gain spreads one correction over correlated coefficients
    // with opposite signs, and if the one that should fall is pinned at its bound (a seed
    // coefficient of 0 is), only the rising one moves, so the prediction at x moves AWAY
    // from the sample. Repeated, that diverges geometrically (seen in `kvroute simulate`:
    // decode predictions of 50 s fed by 25 ms samples). When the clamped step moves the
    // prediction the wrong way or past the sample, step along x instead: all features are
    // >= 0, so every coefficient moves with the residual's sign and clamping can only shorten
    // the step. It corrects the fraction of the residual RLS would have corrected at x.
    double moved = 0;
    for (std::size_t i = 0; i < N; ++i) moved += (next[i] - theta[i]) * x[i];
    if (moved * residual < 0 || std::abs(moved) > std::abs(residual)) {
      double xx = 0;
      for (std::size_t i = 0; i < N; ++i) xx += x[i] * x[i];
      const double fraction = (denom - o.forgetting) / denom;  // x'Px / (lambda + x'Px)
      for (std::size_t i = 0; i < N; ++i) {
        const double step = xx > 0 ? fraction * residual * x[i] / xx : 0;
        next[i] = std::clamp(theta[i] + step, lo[i], hi[i]);
      }
    }
    for (double v : next) {
      if (!std::isfinite(v)) return false;
    }
    Mat<N> next_p{};
    double trace = 0;
    for (std::size_t i = 0; i < N; ++i) {
      for (std::size_t j = 0; j < N; ++j) {
        next_p[i][j] = (p[i][j] - k[i] * px[j]) / o.forgetting;
        if (!std::isfinite(next_p[i][j])) return false;
      }
      trace += next_p[i][i];
    }
    // A covariance with a non-positive diagonal has lost definiteness to rounding: the next
    // gain would point anywhere.
    for (std::size_t i = 0; i < N; ++i) {
      if (!(next_p[i][i] > 0)) return false;
    }
    if (trace > p_trace_cap) {
      double f = p_trace_cap / trace;
      for (auto& row : next_p) {
        for (double& v : row) v *= f;
      }
    }
    theta = next;
    p = next_p;
    ++samples;
    return true;
  }
};

bool GoodSeconds(double s) { return std::isfinite(s) && s > 0; }
bool GoodCount(double v) { return std::isfinite(v) && v >= 0 && v < 1e12; }

}  // namespace

struct RateLearner::State {
  RateSeed seed;
  double attention_q = 0;  // q = c2 / c1 of the seed: work(t) = t + q·t², fixed per worker
  double Work(double tokens) const { return tokens + attention_q * tokens * tokens; }
  double prefill_y0 = 1;  // seed TTFT at kTokenScale tokens, seconds
  double decode_y0 = 1;   // seed step time at (kBatchScale, kKvScale), seconds
  Rls<2> prefill;
  Rls<3> decode;
  Vec<2> prefill_lo{}, prefill_hi{};
  Vec<3> decode_lo{}, decode_hi{};
  Vec<2> prefill_seed{};  // where a reset restarts (normalised units)
  Vec<3> decode_seed{};
  std::uint64_t rejected = 0;
  std::uint64_t resets = 0;
};

void ScaleSeedTime(RateSeed& seed, double factor) {
  seed.prefill_overhead_s *= factor;
  seed.prefill_s_per_token *= factor;
  seed.prefill_s_per_token_sq *= factor;
  seed.decode.base_s *= factor;
  seed.decode.per_sequence_s *= factor;
  seed.decode.per_kv_token_s *= factor;
}

std::expected<RateSeed, std::string> SeedFromProfile(const engine::Profile& profile) {
  engine::StepTimeModel model(profile);
  // Up to 128k tokens: long-context prompts are where attention's quadratic share shows, and
  // the learner keeps this curve's shape (see rate_learner.h). Tokens in units of 1024 keep
  // the normal equations well conditioned.
  std::vector<Vec<3>> px;
  std::vector<double> py;
  for (std::uint32_t t = 256; t <= 131072; t *= 2) {
    const double k = t / 1024.0;
    px.push_back({1.0, k, k * k});
    py.push_back(ToSeconds(model.PrefillTime(t, 0)));
  }
  Vec<3> pc{};
  if (!LeastSquares<3>(px, py, pc) || !(pc[1] > 0) || !std::isfinite(pc[1]) ||
      !std::isfinite(pc[2])) {
    return std::unexpected("profile " + profile.name + ": prefill time does not grow with tokens");
  }
  std::vector<Vec<3>> dx;
  std::vector<double> dy;
  for (std::uint32_t b : {1u, 4u, 16u, 64u, 128u}) {
    for (std::uint64_t ctx : {512u, 2048u, 8192u}) {
      dx.push_back({1.0, static_cast<double>(b), static_cast<double>(b * ctx)});
      dy.push_back(ToSeconds(model.DecodeStepTime(b, b * ctx)));
    }
  }
  Vec<3> dc{};
  if (!LeastSquares<3>(dx, dy, dc)) {
    return std::unexpected("profile " + profile.name + ": decode step fit is singular");
  }
  RateSeed seed;
  seed.prefill_overhead_s = std::max(0.0, pc[0]);
  seed.prefill_s_per_token = pc[1] / 1024;
  seed.prefill_s_per_token_sq = std::max(0.0, pc[2]) / (1024.0 * 1024.0);
  seed.decode = {std::max(0.0, dc[0]), std::max(0.0, dc[1]), std::max(0.0, dc[2])};
  if (seed.decode.Seconds(kBatchScale, kKvScale) <= 0) {
    return std::unexpected("profile " + profile.name + ": decode step time is zero");
  }
  return seed;
}

double ShrinkTowardPeers(double own_rate, double own_samples, double peer_rate,
                         double prior_samples) {
  if (!(own_rate > 0) || !(peer_rate > 0) || !(prior_samples > 0) || !(own_samples >= 0)) {
    return own_rate;
  }
  const double w = own_samples / (own_samples + prior_samples);
  return std::exp((1 - w) * std::log(peer_rate) + w * std::log(own_rate));
}

RateLearner::RateLearner(RateLearnerOptions options) : options_(options) {
  options_.forgetting = std::clamp(options_.forgetting, 0.5, 1.0);
  options_.prior_weight = std::max(options_.prior_weight, 1e-3);
  options_.outlier_clip = std::max(options_.outlier_clip, 0.1);
  options_.max_drift = std::max(options_.max_drift, 1.0);
}

RateLearner::~RateLearner() = default;

void RateLearner::Seed(WorkerId worker, const RateSeed& seed) {
  auto st = std::make_unique<State>();
  st->seed = seed;
  st->seed.prefill_s_per_token = std::max(seed.prefill_s_per_token, 1e-12);
  st->seed.prefill_s_per_token_sq = std::max(seed.prefill_s_per_token_sq, 0.0);
  if (!std::isfinite(st->seed.prefill_s_per_token_sq)) st->seed.prefill_s_per_token_sq = 0;
  st->attention_q = st->seed.prefill_s_per_token_sq / st->seed.prefill_s_per_token;
  st->prefill_y0 =
      st->seed.prefill_overhead_s + st->seed.prefill_s_per_token * st->Work(kTokenScale);
  st->decode_y0 = std::max(seed.decode.Seconds(kBatchScale, kKvScale), 1e-9);
  const double d = options_.max_drift;
  Vec<2> p0{st->seed.prefill_overhead_s / st->prefill_y0,
            st->seed.prefill_s_per_token * kTokenScale / st->prefill_y0};
  st->prefill.Reset(p0, options_.prior_weight);
  st->prefill_seed = p0;
  st->prefill_lo = {0.0, p0[1] / d};
  st->prefill_hi = {d, p0[1] * d};
  Vec<3> d0{seed.decode.base_s / st->decode_y0,
            seed.decode.per_sequence_s * kBatchScale / st->decode_y0,
            seed.decode.per_kv_token_s * kKvScale / st->decode_y0};
  st->decode.Reset(d0, options_.prior_weight);
  st->decode_seed = d0;
  st->decode_lo = {0.0, 0.0, 0.0};
  st->decode_hi = {d, d, d};
  std::lock_guard lock(mu_);
  workers_[worker] = std::move(st);
}

void RateLearner::Remove(WorkerId worker) {
  std::lock_guard lock(mu_);
  workers_.erase(worker);
}

void RateLearner::ObservePrefill(WorkerId worker, double tokens, Nanos ttft,
                                 double context_pairs, double queued_work) {
  double y = ToSeconds(ttft);
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  State& st = *it->second;
  if (!GoodSeconds(y) || !GoodCount(tokens) || tokens < 1 || !GoodCount(context_pairs) ||
      !GoodCount(queued_work)) {
    ++st.rejected;
    return;
  }
  y = std::min(y, options_.max_sample_s);
  // The request's own tokens on the curve, the queue ahead as its requests' own (header).
  const Vec<2> x{1.0, (st.Work(tokens) + 2 * st.attention_q * context_pairs + queued_work) /
                          kTokenScale};
  if (!std::isfinite(x[1]) ||
      !st.prefill.Update(x, y / st.prefill_y0, options_, st.prefill_lo, st.prefill_hi)) {
    st.prefill.Reset(st.prefill_seed, options_.prior_weight);
    ++st.resets;
  }
}

void RateLearner::ObserveDecode(WorkerId worker, double batch, double kv_tokens, Nanos itl) {
  double y = ToSeconds(itl);
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  State& st = *it->second;
  if (!GoodSeconds(y) || !GoodCount(batch) || batch < 1 || !GoodCount(kv_tokens)) {
    ++st.rejected;
    return;
  }
  y = std::min(y, options_.max_sample_s);
  if (!st.decode.Update({1.0, batch / kBatchScale, kv_tokens / kKvScale}, y / st.decode_y0,
                        options_, st.decode_lo, st.decode_hi)) {
    st.decode.Reset(st.decode_seed, options_.prior_weight);
    ++st.resets;
  }
}

std::optional<double> RateLearner::PrefillWork(WorkerId worker, double uncached,
                                               double cached) const {
  if (!GoodCount(uncached) || !GoodCount(cached)) return std::nullopt;
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  const State& st = *it->second;
  return st.Work(uncached) + 2 * st.attention_q * uncached * cached;
}

std::optional<RateEstimate> RateLearner::Estimate(WorkerId worker) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  const State& st = *it->second;
  RateEstimate e;
  e.prefill_overhead_s = st.prefill.theta[0] * st.prefill_y0;
  const double s_per_token = st.prefill.theta[1] * st.prefill_y0 / kTokenScale;
  e.prefill_s_per_token = s_per_token;
  e.prefill_s_per_token_sq = st.attention_q * s_per_token;
  e.attention_q = st.attention_q;
  e.prefill_tokens_per_s = kRateReferenceTokens / (s_per_token * st.Work(kRateReferenceTokens));
  e.decode.base_s = st.decode.theta[0] * st.decode_y0;
  e.decode.per_sequence_s = st.decode.theta[1] * st.decode_y0 / kBatchScale;
  e.decode.per_kv_token_s = st.decode.theta[2] * st.decode_y0 / kKvScale;
  e.prefill_samples = st.prefill.samples;
  e.decode_samples = st.decode.samples;
  e.rejected_samples = st.rejected;
  e.resets = st.resets;
  return e;
}

}  // namespace kvroute::fleet
