// TCP transport, the loop: the connect phase, accept, dispatch readiness, heartbeats, stall and deadlock detection,
// completion.
#include "tcp_internal.h"

namespace tg {
namespace tcp {
// The connect phase (net_util.h connectPeers); each outgoing connection opens with a Hello naming this node.
bool Runner::connectAll() {
  return connectPeers(*this, spec, wfd, conns, outBy, [this](Conn* c, size_t) { return queueHeader(c, kHello, spec.self, 0, 0); });
}

bool Runner::housekeeping(Clock::time_point now) {
  for (auto& cp : conns) {
    Conn* c = cp.get();
    if (c->finished) continue;
    if (!c->helloSeen) {
      if (msBetween(c->accepted, now) > spec.connectMs) {
        refuse(c, "handshake_timeout");
        c->finished = true;
      }
      continue;
    }
    if (msBetween(c->lastHeard, now) > spec.stallMs)
      return fail(Failure::Stalled, c->peer, -1,
                  peerName(c->peer) + " stalled: nothing heard for " + std::to_string(static_cast<long>(msBetween(c->lastHeard, now))) + " ms");
    bool idleOut = c->outgoing && !c->sendDone && !c->laneBusy;
    bool idleIn = !c->outgoing;
    if ((idleOut || idleIn) && !c->pending() && msBetween(c->lastHeartbeat, now) >= spec.heartbeatMs) {
      queueHeader(c, kHeartbeat, 0, 0, 0);
      c->lastHeartbeat = now;
      int r = flush(c);
      if (r < 0) return false;
      if (!watch(c, EPOLLIN | (r == 0 ? static_cast<uint32_t>(EPOLLOUT) : 0u))) return false;
    }
  }
  if (!checkDialedIn(spec, inBy, msBetween(loopStart, now))) return false;
  if (!requestNext()) return false;
  if (inRemaining == 0)
    for (const Lane& l : lanes)
      if (l.idx < l.ops.size() && l.active == nullptr && !store->has(l.ops[l.idx].block)) return failNeverArrives(spec, l.ops[l.idx]);
  return true;
}

RunOutcome Runner::go() {
  t0 = Clock::now();
  out.profile.startMonoMs = std::chrono::duration<double, std::milli>(t0.time_since_epoch()).count();
  const size_t n = spec.peers.size();
  outBy.assign(n, nullptr);
  inBy.assign(n, nullptr);
  sendTargets(spec, sendsLeft);
  for (auto& ops : laneOps(spec)) {
    lanes.emplace_back();
    lanes.back().ops = std::move(ops);
  }
  for (size_t p = 0; p < n; p++)
    if (!spec.expect[p].empty()) inRemaining++;
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) fail(Failure::Io, -1, -1, std::string("epoll_create1: ") + std::strerror(errno));
  Conn lconn, wconn;  // markers for the listener and the wake fd
  lconn.fd = lfd;
  wconn.fd = wfd;
  for (int fd : adopted_) {  // accepted by the idle gate: read like a connection accepted now
    auto nc = std::make_unique<Conn>();
    nc->fd = fd;
    nc->accepted = nc->lastHeard = nc->lastHeartbeat = Clock::now();
    conns.push_back(std::move(nc));
  }
  adopted_.clear();
  if (!failed() && connectAll()) {
    loopStart = Clock::now();
    if (!spec.sends.empty()) out.profile.dialMs = msBetween(t0, loopStart);
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.ptr = &lconn;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e);
    e.data.ptr = &wconn;
    epoll_ctl(ep, EPOLL_CTL_ADD, wfd, &e);
    for (auto& c : conns)
      if (flush(c.get()) < 0 || !watch(c.get(), EPOLLIN | (c->pending() ? static_cast<uint32_t>(EPOLLOUT) : 0u))) break;
    if (!failed()) pump();
    epoll_event evs[64];
    while (!failed()) {
      bool outsDone = true;
      for (auto& c : conns)
        if (c->outgoing && !c->finished) outsDone = false;
      if (inRemaining == 0 && lanesDone() && outsDone) break;
      int timeout = waitingDrain ? 1 : 50;
      if (paced) {
        const double left = std::chrono::duration<double, std::milli>(pacedUntil - Clock::now()).count();
        timeout = left <= 0 ? 0 : std::min(timeout, static_cast<int>(std::ceil(left)));
      }
      int k = epoll_wait(ep, evs, 64, timeout);
      out.profile.waits++;
      if (k < 0 && errno != EINTR) {
        fail(Failure::Io, -1, -1, std::string("epoll_wait: ") + std::strerror(errno));
        break;
      }
      for (int i = 0; i < k && !failed(); i++) {
        Conn* c = static_cast<Conn*>(evs[i].data.ptr);
        if (c == &wconn) {
          fail(Failure::Cancelled, -1, -1, "transfer cancelled");
          break;
        }
        if (c == &lconn) {
          while (Conn* raw = acceptConn(lfd, conns))
            if (!watch(raw, EPOLLIN)) break;
          continue;
        }
        if (c->finished) continue;
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
          if (!onReadable(c)) break;
        }
        if (!c->finished && (evs[i].events & EPOLLOUT)) {
          if (c->laneBusy) {
            if (!pump()) break;
          } else {
            int r = flush(c);
            if (r < 0) break;
            if (!watch(c, EPOLLIN | (r == 0 ? static_cast<uint32_t>(EPOLLOUT) : 0u))) break;
          }
        }
        if (c->finished && c->fd >= 0) {
          epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
          close(c->fd);
          c->fd = -1;
        }
      }
      if (!failed() && (waitingDrain || paced)) pump();
      if (!failed()) housekeeping(Clock::now());
      for (auto& c : conns)
        if (c->finished && c->fd >= 0) {
          epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
          close(c->fd);
          c->fd = -1;
        }
    }
  }
  if (failed()) {
    // Reset connections so peers learn at once (unread data makes close() send RST).
    for (auto& c : conns)
      if (c->fd >= 0) {
        linger lg{1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      }
  }
  out.elapsedMs = msBetween(t0, Clock::now());
  return out;
}

}  // namespace tcp
}  // namespace tg
