// SPDX-License-Identifier: MIT
// The peer's copies of bench_leaf (x * 3 + 1): one with XRay's entry sled
// only (-fxray-instrumentation-bundle=function-entry), one with its entry
// and exit sleds, and one never instrumented (the untraced baseline).
#pragma once

extern "C" {
int xray_leaf_entry(int x);
int xray_leaf_full(int x);
int xray_leaf_plain(int x);
}
