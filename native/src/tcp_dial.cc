// TCP transport, connect phase: dial every peer this node sends to before any block moves.
#include "tcp_internal.h"

namespace tg {
namespace tcp {
// Dials every peer this node sends to, retrying refused connections until connectMs; no data moves until all
// are connected, so an unreachable peer fails the role before any byte of the model is sent.
bool Runner::connectAll() {
  struct Dial {
    int32_t peer = -1;
    int fd = -1;
    addrinfo* ai = nullptr;
    Clock::time_point retryAt;
    std::string lastError = "no answer";
  };
  std::vector<Dial> dials;
  for (size_t p = 0; p < spec.peers.size(); p++)
    if (sendsLeft[p] > 0) {
      Dial d;
      d.peer = static_cast<int32_t>(p);
      dials.push_back(d);
    }
  auto freeAll = [&]() {
    for (auto& d : dials) {
      if (d.fd >= 0) close(d.fd);
      if (d.ai != nullptr) freeaddrinfo(d.ai);
    }
  };
  for (auto& d : dials) {
    const PeerAddr& a = spec.peers[d.peer];
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &d.ai);
    if (rc != 0) {
      freeAll();
      return fail(Failure::Unreachable, d.peer, -1, peerName(d.peer) + " is unreachable: cannot resolve host: " + gai_strerror(rc));
    }
    d.retryAt = Clock::now();
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(spec.connectMs);
  size_t done = 0;
  while (done < dials.size()) {
    Clock::time_point now = Clock::now();
    std::vector<pollfd> pfds;
    std::vector<Dial*> which;
    for (auto& d : dials) {
      if (d.fd == -2) continue;  // connected
      if (d.fd < 0 && now >= d.retryAt) {
        d.fd = socket(d.ai->ai_family, d.ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (d.fd < 0) {
          freeAll();
          return fail(Failure::Io, d.peer, -1, std::string("socket: ") + std::strerror(errno));
        }
        if (connect(d.fd, d.ai->ai_addr, d.ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
          d.lastError = std::strerror(errno);
          close(d.fd);
          d.fd = -1;
          d.retryAt = now + std::chrono::milliseconds(25);
          continue;
        }
      }
      if (d.fd >= 0) {
        pfds.push_back(pollfd{d.fd, POLLOUT, 0});
        which.push_back(&d);
      }
    }
    pfds.push_back(pollfd{wfd, POLLIN, 0});
    if (now >= deadline) {
      for (auto& d : dials)
        if (d.fd != -2) {
          std::string msg = peerName(d.peer) + " is unreachable: " + d.lastError + " (gave up after " +
                            std::to_string(spec.connectMs) + " ms, before any block was sent)";
          int32_t p = d.peer;
          freeAll();
          return fail(Failure::Unreachable, p, -1, msg);
        }
    }
    int n = poll(pfds.data(), pfds.size(), 20);
    if (n < 0 && errno != EINTR) {
      freeAll();
      return fail(Failure::Io, -1, -1, std::string("poll: ") + std::strerror(errno));
    }
    if (pfds.back().revents & POLLIN) {
      freeAll();
      return fail(Failure::Cancelled, -1, -1, "transfer cancelled");
    }
    for (size_t i = 0; i + 1 < pfds.size(); i++) {
      if (pfds[i].revents == 0) continue;
      Dial* d = which[i];
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        d->lastError = std::strerror(err);
        close(d->fd);
        d->fd = -1;
        d->retryAt = Clock::now() + std::chrono::milliseconds(25);
        continue;
      }
      int one = 1;
      setsockopt(d->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_unique<Conn>();
      c->fd = d->fd;
      c->outgoing = true;
      c->peer = d->peer;
      c->helloSeen = true;
      c->lastHeard = c->lastHeartbeat = Clock::now();
      queueHeader(c.get(), kHello, spec.self, 0, 0);
      outBy[d->peer] = c.get();
      conns.push_back(std::move(c));
      d->fd = -2;
      done++;
    }
  }
  for (auto& d : dials)
    if (d.ai != nullptr) freeaddrinfo(d.ai);
  return true;
}
}  // namespace tcp
}  // namespace tg
