// Registry metrics built the same way in every kvfleet service: one
// unlabelled counter or histogram per name, and the bucket boundaries for
// LLM serving latencies, shared so that a dashboard can put the router's and
// the workers' histograms side by side (same boundaries, comparable
// quantiles).
//
//   prometheus::Histogram* ttft = AddHistogram(registry, "x_ttft_seconds", "...", TtftBuckets());
#pragma once

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace kvfleet::transport {

// The family `name` with its one unlabelled metric; the registry owns both.
prometheus::Histogram* AddHistogram(prometheus::Registry& registry, const char* name, const char* help,
                                    const prometheus::Histogram::BucketBoundaries& buckets);
prometheus::Counter* AddCounter(prometheus::Registry& registry, const char* name, const char* help);

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
// A grammar's next-token mask: tens of microseconds to tens of milliseconds.
const prometheus::Histogram::BucketBoundaries& MaskBuckets();

}  // namespace kvfleet::transport
