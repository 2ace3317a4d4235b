#include "services/transport/metrics/registry_metrics.h"

namespace kvfleet::transport {

using prometheus::Histogram;

Histogram* AddHistogram(prometheus::Registry& registry, const char* name, const char* help,
                        const Histogram::BucketBoundaries& buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

prometheus::Counter* AddCounter(prometheus::Registry& registry, const char* name, const char* help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

const Histogram::BucketBoundaries& TtftBuckets() {
  static const Histogram::BucketBoundaries b = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                                0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
  return b;
}

const Histogram::BucketBoundaries& InterTokenBuckets() {
  static const Histogram::BucketBoundaries b = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
                                                0.075, 0.1,    0.15,  0.2,  0.3,   0.4,  0.5,   0.75, 1.0,  2.5};
  return b;
}

const Histogram::BucketBoundaries& RequestBuckets() {
  static const Histogram::BucketBoundaries b = {0.1,  0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,  10.0,
                                                15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
  return b;
}

const Histogram::BucketBoundaries& StepTokenBuckets() {
  static const Histogram::BucketBoundaries b = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  return b;
}

const Histogram::BucketBoundaries& OverheadBuckets() {
  static const Histogram::BucketBoundaries b = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                0.005,   0.01,   0.025,   0.05,   0.1,   0.25};
  return b;
}

const Histogram::BucketBoundaries& MaskBuckets() {
  static const Histogram::BucketBoundaries b = {0.000025, 0.00005, 0.0001,  0.00015, 0.0002, 0.0003,
                                                0.0004,   0.0005,  0.00075, 0.001,   0.0015, 0.002,
                                                0.003,    0.005,   0.0075,  0.01,    0.02,   0.05};
  return b;
}

}  // namespace kvfleet::transport
