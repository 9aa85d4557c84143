// Helpers for tests that read the Prometheus text exposition.
#ifndef STOKER_TESTS_METRICS_EXPOSITION_H_
#define STOKER_TESTS_METRICS_EXPOSITION_H_

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

namespace stoker::metrics {

// The value of the sample `name{labels}` (`name` alone when labels is
// empty), with labels written exactly as the exposition orders them; NaN
// when there is no such line, which every EXPECT_EQ rejects.
inline double Value(const std::string& text, const std::string& name,
                    const std::string& labels) {
  const std::string head =
      labels.empty() ? name + " " : name + "{" + labels + "} ";
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, head.size(), head) == 0) {
      return std::strtod(line.c_str() + head.size(), nullptr);
    }
  }
  return std::nan("");
}

}  // namespace stoker::metrics

#endif  // STOKER_TESTS_METRICS_EXPOSITION_H_
