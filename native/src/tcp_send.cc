// TCP transport, send side: epoll interest, writes from the block store, send lanes (in-order or per-peer).
#include "tcp_internal.h"

namespace tg {
namespace tcp {
bool Runner::watch(Conn* c, uint32_t ev) {
  if (c->events == ev) return true;
  epoll_event e{};
  e.events = ev;
  e.data.ptr = c;
  int op = c->events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (epoll_ctl(ep, op, c->fd, &e) != 0) return fail(Failure::Io, c->peer, -1, std::string("epoll_ctl: ") + std::strerror(errno));
  c->events = ev;
  return true;
}

// Writes what is pending on c: queued frame headers and the data frame's payload go out together in one sendmsg
// (≤ kMaxSend payload bytes per call), so a block costs no extra call for its header. 1: nothing left; 0: wait
// for EPOLLOUT (the send buffer is full); -1: error (recorded).
int Runner::flush(Conn* c) {
  while (c->pending()) {
    iovec iov[2];
    int k = 0;
    const size_t hdr = c->wHdrLen - c->wHdrOff;
    if (hdr > 0) iov[k++] = iovec{c->wBuf + c->wHdrOff, hdr};
    const uint64_t pay = c->wPayLeft < kMaxSend ? c->wPayLeft : kMaxSend;
    if (pay > 0) iov[k++] = iovec{const_cast<uint8_t*>(c->wPay), static_cast<size_t>(pay)};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(k);
    ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      if (c->wPayLeft > 0)
        fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(c->wBlock),
             peerName(c->peer) + " failed while receiving block " + std::to_string(c->wBlock) + ": " + std::strerror(errno));
      else
        fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " failed: send: " + std::strerror(errno));
      return -1;
    }
    size_t h = static_cast<size_t>(n) < hdr ? static_cast<size_t>(n) : hdr;
    c->wHdrOff += h;
    uint64_t p = static_cast<uint64_t>(n) - h;
    if (p > 0) {
      c->wPay += p;
      c->wPayLeft -= p;
      out.bytesSent += p;
      out.profile.sendCalls++;
    }
    // A short write filled the send buffer: wait for EPOLLOUT rather than pay a call that fails with EAGAIN.
    if (p < pay || h < hdr) return c->pending() ? 0 : 1;
  }
  return 1;
}

// Advances every lane as far as blocks are present and sockets accept bytes.
bool Runner::pump() {
  waitingDrain = false;
  paced = false;
  for (Lane& l : lanes)
    if (!pumpLane(l)) return false;
  return true;
}

bool Runner::pumpLane(Lane& l) {
  for (;;) {
    if (l.active != nullptr) {
      Conn* c = l.active;
      int r = flush(c);
      if (r < 0) return false;
      if (r == 0) return watch(c, static_cast<uint32_t>(EPOLLIN | EPOLLOUT));
      if (l.armed) {
        l.armed = false;
        if (--sendsLeft[c->peer] == 0) {
          shutdown(c->fd, SHUT_WR);
          c->sendDone = true;
        }
        l.idx++;
      }
      if (!watch(c, EPOLLIN)) return false;
      c->laneBusy = false;
      l.active = nullptr;
    }
    if (l.idx >= l.ops.size()) return true;
    const SendOp& op = l.ops[l.idx];
    if (!store->has(op.block)) return true;  // waits for the block to arrive
    Conn* c = outBy[op.peer];
    if (c->laneBusy) return true;  // in-order lanes never share a connection; kept for safety
    if (spec.pull && c->credits == 0) return true;  // the receiver has not asked for it yet
    if (!spec.perPeer && l.last != nullptr && l.last != c && l.last->fd >= 0) {
      int queued = 0;
      if (ioctl(l.last->fd, SIOCOUTQNSD, &queued) == 0 && queued > kDrainedBytes) {
        waitingDrain = true;
        return true;
      }
    }
    if (spec.paceBytesPerS > 0) {
      // Paced: block i starts no earlier than loopStart + (bytes armed before it) / rate, so a late start or a
      // descheduled thread catches up, and a run never goes faster than the emulated link on average.
      const auto due = loopStart + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(static_cast<double>(armedBytes) / static_cast<double>(spec.paceBytesPerS)));
      if (Clock::now() < due) {
        pacedUntil = paced && pacedUntil < due ? pacedUntil : due;
        paced = true;
        return true;
      }
    }
    armedBytes += store->length(op.block);
    l.last = c;
    l.active = c;
    c->laneBusy = true;
    if (c->pending()) continue;  // a heartbeat is still going out; flush it first
    if (spec.pull) c->credits--;
    queueHeader(c, kData, op.block, store->checksums[op.block], store->length(op.block));
    c->wPay = store->base + store->offset(op.block);
    c->wPayLeft = store->length(op.block);
    l.armed = true;
  }
}

}  // namespace tcp
}  // namespace tg
