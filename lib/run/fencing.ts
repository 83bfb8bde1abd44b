/**
 * The two timing constants that keep a Run to one execution at a time, kept together because
 * they must be related: the reaper reschedules a Run STALE_MS after its runtimed's last accepted
 * heartbeat (lastProbeTime), and runtimed's execution lease ends FENCE_MS after that same
 * lastProbeTime, so the old execution is killed STALE_MS - FENCE_MS (10 s, for clock skew between
 * runtimed's and the reaper's nodes and for the kill itself) before anyone may start a new one.
 */
export const STALE_MS = 30_000;
export const FENCE_MS = 20_000;
