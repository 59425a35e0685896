#include "simgpu/sim_timeslice.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gpumux::sim {

namespace {

bool HasWork(const SliceContext& c) { return c.submitted_ns > c.served_ns; }

// The next context with work after `current` in round-robin order, `current` itself last; -1 if
// none has work.
int NextWithWork(const SliceSchedule& s, int current) {
  for (int i = 1; i <= kSliceContexts; ++i) {
    int c = ((current < 0 ? -1 : current) + i) % kSliceContexts;
    if (HasWork(s.contexts[c])) return c;
  }
  return -1;
}

}  // namespace

void RecordRun(SliceContext& c, uint64_t start_ns, uint64_t wall_ns, uint64_t served_ns) {
  SliceContext::Run& last = c.runs[(c.next_run + kRunsKept - 1) % kRunsKept];
  // The same pace: served per wall time equal to within one nanosecond of service over the runs.
  auto same_pace = [&] {
    double was = double(last.served_at_end - last.served_at_start) * double(wall_ns);
    double now = double(served_ns) * double(last.end_ns - last.start_ns);
    return std::abs(was - now) <= double(std::max(wall_ns, last.end_ns - last.start_ns));
  };
  if (c.next_run > 0 && last.end_ns == start_ns && last.served_at_end == c.served_ns &&
      same_pace()) {
    last.end_ns += wall_ns;  // the same run goes on
    last.served_at_end += served_ns;
  } else {
    c.runs[c.next_run % kRunsKept] = {start_ns, start_ns + wall_ns, c.served_ns,
                                      c.served_ns + served_ns};
    ++c.next_run;
  }
  c.served_ns += served_ns;
}

void StartSchedule(SliceSchedule* s, uint64_t slice_ns, uint64_t switch_ns) {
  std::memset(static_cast<void*>(s), 0, sizeof(*s));
  s->slice_ns = std::max<uint64_t>(slice_ns, 1000);
  s->switch_ns = switch_ns;
  s->current = -1;
}

void Advance(SliceSchedule* s, uint64_t now_ns, ChargeFn charge, void* arg) {
  uint64_t t = s->at_ns;
  while (t < now_ns) {
    bool runs_on = s->current >= 0 && HasWork(s->contexts[s->current]) && t < s->slice_end_ns;
    if (!runs_on) {
      int next = NextWithWork(*s, s->current);
      if (next < 0) {  // idle until now
        t = now_ns;
        break;
      }
      if (next != s->current && s->current >= 0) t += s->switch_ns;
      s->current = next;
      s->slice_end_ns = t + s->slice_ns;
      if (t >= now_ns) break;  // still switching at now
    }
    SliceContext& c = s->contexts[s->current];
    uint64_t run = std::min({s->slice_end_ns, now_ns, t + (c.submitted_ns - c.served_ns)}) - t;
    RecordRun(c, t, run, run);
    if (charge) charge(s->current, run, arg);
    t += run;
  }
  s->at_ns = std::max(s->at_ns, t);
}

uint64_t Submit(SliceSchedule* s, int context, uint64_t duration_ns) {
  SliceContext& c = s->contexts[context];
  c.submitted_ns += duration_ns;
  return c.submitted_ns;
}

void Drop(SliceSchedule* s, int context) {
  SliceContext& c = s->contexts[context];
  c.submitted_ns = c.served_ns;
}

uint64_t EarliestDone(const SliceSchedule& s, int context, uint64_t ticket) {
  const SliceContext& c = s.contexts[context];
  return s.at_ns + (ticket > c.served_ns ? ticket - c.served_ns : 0);
}

uint64_t DoneAt(const SliceSchedule& s, int context, uint64_t ticket) {
  const SliceContext& c = s.contexts[context];
  uint32_t kept = std::min<uint32_t>(c.next_run, kRunsKept);
  const SliceContext::Run* oldest = nullptr;
  for (uint32_t i = 0; i < kept; ++i) {
    const SliceContext::Run& r = c.runs[(c.next_run - 1 - i) % kRunsKept];
    oldest = &r;
    if (ticket > r.served_at_start && ticket <= r.served_at_end)
      return r.start_ns +
             uint64_t(double(ticket - r.served_at_start) * double(r.end_ns - r.start_ns) /
                      double(r.served_at_end - r.served_at_start));
  }
  return oldest ? oldest->start_ns : 0;
}

}  // namespace gpumux::sim
