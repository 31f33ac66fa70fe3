#define BOOST_TEST_MODULE metrics
#include <boost/test/unit_test.hpp>

#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"

namespace poolcoord::base {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

BOOST_AUTO_TEST_CASE(RendersFamiliesSortedWithHelpAndType) {
  MetricsRegistry r;
  r.AddGauge("zz_gauge", "Last.").WithLabels({}).Set(-3);
  r.AddCounter("aa_total", "First.\nline two", {"verb", "code"}).WithLabels({"GET", "200"}).Inc(2);
  const std::string text = r.Render();
  BOOST_TEST(text ==
             "# HELP aa_total First.\\nline two\n# TYPE aa_total counter\n"
             "aa_total{code=\"200\",verb=\"GET\"} 2\n"
             "# HELP zz_gauge Last.\n# TYPE zz_gauge gauge\nzz_gauge -3\n");
}

BOOST_AUTO_TEST_CASE(LabelValuesAreEscaped) {
  MetricsRegistry r;
  r.AddCounter("c_total", "h", {"path"}).WithLabels({"a\"b\\c\nd"}).Inc();
  BOOST_TEST(Has(r.Render(), "c_total{path=\"a\\\"b\\\\c\\nd\"} 1"));
}

BOOST_AUTO_TEST_CASE(HistogramBucketsAreCumulativeWithLeLast) {
  MetricsRegistry r;
  HistogramFamily& h = r.AddHistogram("d_seconds", "h", {"verb"}, {0.005, 0.5, 1, 10});
  h.WithLabels({"GET"}).Observe(0.001);
  h.WithLabels({"GET"}).Observe(0.5);  // on the bound: counts in le="0.5"
  h.WithLabels({"GET"}).Observe(100);
  const std::string text = r.Render();
  BOOST_TEST(Has(text, "d_seconds_bucket{verb=\"GET\",le=\"0.005\"} 1"));
  BOOST_TEST(Has(text, "d_seconds_bucket{verb=\"GET\",le=\"0.5\"} 2"));
  BOOST_TEST(Has(text, "d_seconds_bucket{verb=\"GET\",le=\"1\"} 2"));
  BOOST_TEST(Has(text, "d_seconds_bucket{verb=\"GET\",le=\"10\"} 2"));
  BOOST_TEST(Has(text, "d_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 3"));
  BOOST_TEST(Has(text, "d_seconds_sum{verb=\"GET\"} 100.501"));
  BOOST_TEST(Has(text, "d_seconds_count{verb=\"GET\"} 3"));
}

BOOST_AUTO_TEST_CASE(RegisteringTwiceSharesTheSeries) {
  MetricsRegistry r;
  r.AddCounter("x_total", "h").WithLabels({}).Inc();
  r.AddCounter("x_total", "other help").WithLabels({}).Inc();
  BOOST_TEST(Has(r.Render(), "x_total 2"));
  BOOST_TEST(r.Render().find("other help") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(EmptyFamilyRendersHeaderOnly) {
  MetricsRegistry r;
  r.AddCounter("y_total", "h", {"a"});
  BOOST_TEST(r.Render() == "# HELP y_total h\n# TYPE y_total counter\n");
}

BOOST_AUTO_TEST_CASE(ConcurrentCountingLosesNothing) {
  MetricsRegistry r;
  CounterFamily& f = r.AddCounter("n_total", "h", {"k"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&f, t] {
      for (int i = 0; i < 5000; ++i) f.WithLabels({i % 2 ? "odd" : "even"}).Inc();
    });
  }
  for (auto& t : threads) t.join();
  const std::string text = r.Render();
  BOOST_TEST(Has(text, "n_total{k=\"even\"} 10000"));
  BOOST_TEST(Has(text, "n_total{k=\"odd\"} 10000"));
}

}  // namespace
}  // namespace poolcoord::base
