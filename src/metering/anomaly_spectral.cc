// The spectral-residual score of AnomalyDetector (anomaly.h, step 5; Ren et al., "Time-Series
// Anomaly Detection Service at Microsoft", KDD 2019), online: at each row, over the last
// kSrValues values (the row included), extended by kSrExtend estimated points so that the row is
// not at the window's edge:
//   1. g = mean over i = 1..5 of (x[n-1] - x[n-1-i]) / i; each extension point = x[n-5] + 5 g (the
//      paper's extension; after a spike in the last row it continues the spike upwards, a +8
//      spike on unit noise becoming a +18 ramp, which makes the row itself less salient: one
//      reason this online, last-point form scores poorly on NAB, docs/anomaly.md);
//   2. X = FFT(x) (64 points); L = log |X|; R = L - (3-point moving average of L);
//   3. S = |IFFT(exp(R) X / |X|)| (the saliency map); s = S at the row;
//   4. ratio = (s - m) / m, m = the mean of the previous kSrRecent rows' s.
// A value the spectrum does not predict (a spike, a step) stands out in S; a periodic pattern does
// not. The detector flags at ratio >= spectral_tau (3 in the paper).
//
// Worked example (the saliency step on a constant window with one spike): x = 0 ... 0 1 0 ... 0;
// |X| is flat (1 at every frequency), so L = 0, R = 0 and S = |x| = the spike alone; a row whose s
// is 1 after rows whose s averaged 0.2 has ratio (1 - 0.2) / 0.2 = 4 >= 3: flagged.
#include <cmath>
#include <complex>
#include <vector>

#include "tessera/metering/anomaly.h"

namespace tessera::metering {
namespace {

constexpr size_t kSrSize = 64;  // FFT length: values + extension
constexpr size_t kSrExtend = 5;
constexpr size_t kSrRecent = 21;

// In-place iterative radix-2 FFT; `inverse` without the 1/n factor (magnitudes are compared
// relative to their own recent mean, so the factor cancels).
void Fft(std::vector<std::complex<double>>& a, bool inverse) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const double ang = 2 * M_PI / static_cast<double>(len) * (inverse ? 1 : -1);
    const std::complex<double> wl(std::cos(ang), std::sin(ang));
    for (size_t i = 0; i < n; i += len) {
      std::complex<double> w(1);
      for (size_t j = 0; j < len / 2; ++j) {
        const std::complex<double> u = a[i + j], v = a[i + j + len / 2] * w;
        a[i + j] = u + v;
        a[i + j + len / 2] = u - v;
        w *= wl;
      }
    }
  }
}

}  // namespace

double AnomalyDetector::SpectralResidual(double y) {
  constexpr size_t kValues = kSrSize - kSrExtend;
  sr_values_.push_back(y);
  if (sr_values_.size() > kValues) sr_values_.pop_front();
  if (sr_values_.size() < kValues) return 0;
  std::vector<std::complex<double>> x(sr_values_.begin(), sr_values_.end());
  const size_t n = kValues;
  double g = 0;
  for (size_t i = 1; i <= kSrExtend; ++i) g += (x[n - 1].real() - x[n - 1 - i].real()) / static_cast<double>(i);
  g /= kSrExtend;
  x.resize(kSrSize, x[n - kSrExtend].real() + g * kSrExtend);
  Fft(x, false);
  std::vector<double> log_amp(kSrSize);
  for (size_t k = 0; k < kSrSize; ++k) log_amp[k] = std::log(std::abs(x[k]) + 1e-8);
  for (size_t k = 0; k < kSrSize; ++k) {
    const double avg = (log_amp[(k + kSrSize - 1) % kSrSize] + log_amp[k] + log_amp[(k + 1) % kSrSize]) / 3;
    const double mag = std::abs(x[k]);
    x[k] = mag > 0 ? std::exp(log_amp[k] - avg) * x[k] / mag : std::complex<double>(0);
  }
  Fft(x, true);
  const double s = std::abs(x[n - 1]);
  double ratio = 0;
  if (sr_recent_.size() == kSrRecent) {
    double mean = 0;
    for (double v : sr_recent_) mean += v;
    mean /= kSrRecent;
    if (mean > 1e-12) ratio = std::max((s - mean) / mean, 0.0);
  }
  sr_recent_.push_back(s);
  if (sr_recent_.size() > kSrRecent) sr_recent_.pop_front();
  return ratio;
}

}  // namespace tessera::metering
