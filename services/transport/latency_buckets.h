// Histogram buckets every kvfleet service uses for LLM serving latencies,
// so a dashboard can put the router's and the workers' histograms side by
// side (same boundaries, comparable quantiles).
//
//   prometheus::BuildHistogram().Name(...).Register(r).Add({}, TtftBuckets());
#pragma once

#include <prometheus/histogram.h>

namespace kvfleet::transport {

// From a millisecond (a cached decode step on a GPU) to minutes (a long
// prefill on a CPU).
const prometheus::Histogram::BucketBoundaries& TtftBuckets();
const prometheus::Histogram::BucketBoundaries& InterTokenBuckets();
// Whole requests and queue times.
const prometheus::Histogram::BucketBoundaries& RequestBuckets();
// Tokens per engine step.
const prometheus::Histogram::BucketBoundaries& StepTokenBuckets();
// Sub-millisecond work: the router's own overhead per request.
const prometheus::Histogram::BucketBoundaries& OverheadBuckets();

}  // namespace kvfleet::transport
