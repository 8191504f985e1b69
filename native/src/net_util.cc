// Socket helpers shared by the TCP transport and the verbs transport's control channel (see net_util.h).
#include "net_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>

namespace tg {
std::string listenTcp(const std::string& host, uint16_t port, int& fd, uint16_t& bound) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* ai = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &ai);
  if (rc != 0) return "cannot resolve " + host + ": " + gai_strerror(rc);
  int s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (s >= 0) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (s < 0 || bind(s, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(s, 128) != 0) {
    std::string msg = "cannot listen on " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    if (s >= 0) close(s);
    freeaddrinfo(ai);
    return msg;
  }
  freeaddrinfo(ai);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len);
  bound = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                        : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  fd = s;
  return "";
}

int acceptNext(int lfd) {
  int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

std::string remoteAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown";
  char buf[INET6_ADDRSTRLEN] = {0};
  const void* a = ss.ss_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr)
                                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
  if (inet_ntop(ss.ss_family, a, buf, sizeof buf) == nullptr) return "unknown";
  return buf;
}

ListeningTransport::~ListeningTransport() {
  if (listenFd_ >= 0) close(listenFd_);
}

std::string peerLabel(const RunSpec& spec, int32_t p) {
  if (p < 0 || static_cast<size_t>(p) >= spec.peers.size()) return "an unknown peer";
  const PeerAddr& a = spec.peers[p];
  return "peer " + a.id + " (" + a.host + ":" + std::to_string(a.port) + ")";
}

DialError dialPeers(const RunSpec& spec, const std::vector<int32_t>& peers, int wakeFd, std::vector<int>& fds) {
  using Clock = std::chrono::steady_clock;
  struct Dial {
    int32_t peer = -1;
    int fd = -1;
    bool connected = false;
    addrinfo* ai = nullptr;
    Clock::time_point retryAt;
    std::string lastError = "no answer";
  };
  std::vector<Dial> dials(peers.size());
  DialError err;
  auto finish = [&](Failure f, int32_t peer, std::string msg) {
    for (auto& d : dials) {
      if (d.fd >= 0 && (f != Failure::None || !d.connected)) close(d.fd);
      if (d.ai != nullptr) freeaddrinfo(d.ai);
    }
    err.failure = f;
    err.peer = peer;
    err.message = std::move(msg);
    if (f == Failure::None) {
      fds.clear();
      for (auto& d : dials) fds.push_back(d.fd);
    }
    return err;
  };
  for (size_t i = 0; i < peers.size(); i++) {
    Dial& d = dials[i];
    d.peer = peers[i];
    const PeerAddr& a = spec.peers[d.peer];
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &d.ai);
    if (rc != 0) return finish(Failure::Unreachable, d.peer, peerLabel(spec, d.peer) + " is unreachable: cannot resolve host: " + gai_strerror(rc));
    d.retryAt = Clock::now();
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(spec.connectMs);
  size_t done = 0;
  while (done < dials.size()) {
    Clock::time_point now = Clock::now();
    std::vector<pollfd> pfds;
    std::vector<Dial*> which;
    for (auto& d : dials) {
      if (d.connected) continue;
      if (d.fd < 0 && now >= d.retryAt) {
        d.fd = socket(d.ai->ai_family, d.ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (d.fd < 0) return finish(Failure::Io, d.peer, std::string("socket: ") + std::strerror(errno));
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
    pfds.push_back(pollfd{wakeFd, POLLIN, 0});
    if (now >= deadline)
      for (auto& d : dials)
        if (!d.connected)
          return finish(Failure::Unreachable, d.peer,
                        peerLabel(spec, d.peer) + " is unreachable: " + d.lastError + " (gave up after " +
                            std::to_string(spec.connectMs) + " ms, before any block was sent)");
    int n = poll(pfds.data(), pfds.size(), 20);
    if (n < 0 && errno != EINTR) return finish(Failure::Io, -1, std::string("poll: ") + std::strerror(errno));
    if (pfds.back().revents & POLLIN) return finish(Failure::Cancelled, -1, "transfer cancelled");
    for (size_t i = 0; i + 1 < pfds.size(); i++) {
      if (pfds[i].revents == 0) continue;
      Dial* d = which[i];
      int soErr = 0;
      socklen_t len = sizeof soErr;
      getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &soErr, &len);
      if (soErr != 0) {
        d->lastError = std::strerror(soErr);
        close(d->fd);
        d->fd = -1;
        d->retryAt = Clock::now() + std::chrono::milliseconds(25);
        continue;
      }
      int one = 1;
      setsockopt(d->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      d->connected = true;
      done++;
    }
  }
  return finish(Failure::None, -1, "");
}
std::vector<int32_t> sendTargets(const RunSpec& spec, std::vector<size_t>& counts) {
  counts.assign(spec.peers.size(), 0);
  for (const SendOp& op : spec.sends) counts[op.peer]++;
  std::vector<int32_t> peers;
  for (size_t p = 0; p < counts.size(); p++)
    if (counts[p] > 0) peers.push_back(static_cast<int32_t>(p));
  return peers;
}

std::vector<std::vector<SendOp>> laneOps(const RunSpec& spec) {
  std::vector<std::vector<SendOp>> lanes;
  if (!spec.perPeer) {
    lanes.push_back(spec.sends);
    return lanes;
  }
  std::vector<int> laneOf(spec.peers.size(), -1);
  for (const SendOp& op : spec.sends) {
    if (laneOf[op.peer] < 0) {
      laneOf[op.peer] = static_cast<int>(lanes.size());
      lanes.emplace_back();
    }
    lanes[laneOf[op.peer]].push_back(op);
  }
  return lanes;
}

WakeFd::WakeFd() { fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
WakeFd::~WakeFd() {
  if (fd_ >= 0) close(fd_);
}
void WakeFd::wake() {
  uint64_t one = 1;
  ssize_t n = write(fd_, &one, sizeof one);
  (void)n;
}
void WakeFd::drain() {
  uint64_t v;
  while (read(fd_, &v, sizeof v) > 0) {
  }
}
}  // namespace tg
