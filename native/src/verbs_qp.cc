// Verbs transport, the RDMA side: memory regions, the completion queue, queue pairs (RESET → INIT → RTR → RTS),
// posting writes and receives, completions and the device's asynchronous events. See verbs_internal.h.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "verbs_internal.h"

namespace tg {
namespace verbs {
namespace {
constexpr uint64_t kRecvBit = 1ull << 63;
uint64_t wrId(bool recv, int32_t peer, uint32_t block) {
  return (recv ? kRecvBit : 0) | (static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32) | block;
}
int32_t wrPeer(uint64_t id) { return static_cast<int32_t>((id & ~kRecvBit) >> 32); }
uint32_t wrBlock(uint64_t id) { return static_cast<uint32_t>(id); }
}  // namespace

Runner::~Runner() {
  for (auto& c : conns) {
    if (c->qp != nullptr) ibv_destroy_qp(c->qp);
    if (c->fd >= 0) {
      if (failed()) {  // reset so peers learn at once
        linger lg{1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      }
      close(c->fd);
    }
  }
  if (cq != nullptr) {
    if (unackedEvents > 0) ibv_ack_cq_events(cq, unackedEvents);
    ibv_destroy_cq(cq);
  }
  if (channel != nullptr) ibv_destroy_comp_channel(channel);
  for (ibv_mr* mr : blockMr)
    if (mr != nullptr) ibv_dereg_mr(mr);
  if (localMr != nullptr) ibv_dereg_mr(localMr);
}

// The receiver registers each block it expects on its own (REMOTE_WRITE), so the device bounds every write to its
// block; the sender registers the whole store once as the source of its writes.
bool Runner::registerMemory() {
  blockMr.assign(store->blockCount, nullptr);
  for (size_t p = 0; p < spec.expect.size(); p++)
    for (uint32_t b : spec.expect[p]) {
      if (blockMr[b] != nullptr) continue;
      blockMr[b] = ibv_reg_mr(dev.pd, store->base + store->offset(b), store->length(b), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
      if (blockMr[b] == nullptr)
        return fail(Failure::Io, -1, static_cast<int32_t>(b), "ibv_reg_mr for block " + std::to_string(b) + " on " + dev.name + " failed: " + std::strerror(errno));
    }
  if (!spec.sends.empty()) {
    localMr = ibv_reg_mr(dev.pd, store->base, store->totalBytes, IBV_ACCESS_LOCAL_WRITE);
    if (localMr == nullptr) return fail(Failure::Io, -1, -1, "ibv_reg_mr for the store on " + dev.name + " failed: " + std::strerror(errno));
  }
  return true;
}

bool Runner::createQueue() {
  // Per queue pair: its receives and its send queue (a broken queue pair flushes every posted write, signaled or not).
  int depth = static_cast<int>(spec.peers.size() * (kWindow + 1 + sendQueueDepth()) + 16);
  channel = ibv_create_comp_channel(dev.ctx);
  if (channel == nullptr) return fail(Failure::Io, -1, -1, std::string("ibv_create_comp_channel failed: ") + std::strerror(errno));
  int fl = fcntl(channel->fd, F_GETFL);
  fcntl(channel->fd, F_SETFL, fl | O_NONBLOCK);
  cq = ibv_create_cq(dev.ctx, depth, nullptr, channel, 0);
  if (cq == nullptr) return fail(Failure::Io, -1, -1, "ibv_create_cq(" + std::to_string(depth) + ") failed: " + std::strerror(errno));
  if (ibv_req_notify_cq(cq, 0) != 0) return fail(Failure::Io, -1, -1, std::string("ibv_req_notify_cq failed: ") + std::strerror(errno));
  return true;
}

// Up to kMaxInflight blocks in flight, each in writes of at least 1 MiB (every device allows that much per message).
uint32_t Runner::sendQueueDepth() const {
  const uint64_t perBlock = (store->blockBytes + (1ull << 20) - 1) >> 20;
  uint64_t slots = kMaxInflight * (perBlock < 1 ? 1 : perBlock) + 1;
  if (dev.maxQpWr > 0 && slots > dev.maxQpWr) slots = dev.maxQpWr;
  return static_cast<uint32_t>(slots);
}

bool Runner::makeQp(Conn* c) {
  ibv_qp_init_attr a{};
  a.send_cq = cq;
  a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  c->sendSlots = sendQueueDepth();
  a.cap.max_send_wr = c->outgoing ? c->sendSlots : 1;
  a.cap.max_recv_wr = kWindow + 1;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  c->qp = ibv_create_qp(dev.pd, &a);
  if (c->qp == nullptr) return fail(Failure::Io, c->peer, -1, "ibv_create_qp for " + peerName(c->peer) + " failed: " + std::strerror(errno));
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_INIT;
  s.pkey_index = 0;
  s.port_num = dev.port;
  s.qp_access_flags = c->outgoing ? 0 : IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(c->qp, &s, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    return fail(Failure::Io, c->peer, -1, std::string("queue pair to INIT failed: ") + std::strerror(errno));
  static thread_local std::mt19937 rng{std::random_device{}()};
  c->psn = rng() & 0xffffff;
  return true;
}

QpInfo Runner::localInfo(const Conn* c) const {
  QpInfo i{};
  i.qpn = c->qp->qp_num;
  i.psn = c->psn;
  i.lid = dev.lid;
  i.mtu = static_cast<uint8_t>(dev.mtu);
  i.maxMsg = dev.maxMsg;
  std::memcpy(i.gid, dev.gid.raw, sizeof i.gid);
  return i;
}

bool Runner::connectQp(Conn* c, const QpInfo& remote) {
  c->chunk = remote.maxMsg < dev.maxMsg ? remote.maxMsg : dev.maxMsg;
  if (c->chunk > (1ull << 31)) c->chunk = 1ull << 31;  // an ibv_sge length is 32 bits
  if (c->chunk == 0) return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " announced a largest message of 0 bytes");
  if (c->outgoing && kMaxInflight * ((store->blockBytes + c->chunk - 1) / c->chunk) >= c->sendSlots)
    return fail(Failure::InvalidPlan, c->peer, -1,
                "blocks of " + std::to_string(store->blockBytes) + " bytes need more writes in flight to " + peerName(c->peer) + " than a queue pair of " +
                    std::to_string(c->sendSlots) + " holds (messages of at most " + std::to_string(c->chunk) + " bytes)");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(remote.mtu < static_cast<uint8_t>(dev.mtu) ? remote.mtu : static_cast<uint8_t>(dev.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev.gidIndex);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.port_num = dev.port;
  if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return fail(Failure::PeerFailed, c->peer, -1, "queue pair with " + peerName(c->peer) + " to RTR failed: " + std::strerror(errno));
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;  // 4.096 µs × 2^14 ≈ 67 ms per try; 7 tries: a vanished peer's writes fail in about 0.5 s
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.sq_psn = c->psn;
  r.max_rd_atomic = 1;
  if (ibv_modify_qp(c->qp, &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    return fail(Failure::PeerFailed, c->peer, -1, "queue pair with " + peerName(c->peer) + " to RTS failed: " + std::strerror(errno));
  return true;
}

bool Runner::postRecv(Conn* c) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wrId(true, c->peer, 0);
  wr.sg_list = nullptr;  // a WRITE WITH IMMEDIATE needs a receive, not a buffer: the bytes go to the block's region
  wr.num_sge = 0;
  int rc = ibv_post_recv(c->qp, &wr, &bad);
  if (rc != 0) return fail(Failure::Io, c->peer, -1, "ibv_post_recv for " + peerName(c->peer) + " failed: " + std::strerror(rc));
  c->granted++;
  return true;
}

// One block, one RDMA WRITE WITH IMMEDIATE from the store into the receiver's region for it, announced first on the
// control channel with its checksum and length.
bool Runner::postWrite(Conn* c, uint32_t block) {
  const uint64_t len = store->length(block);
  const Region& r = c->regions[block];
  if (r.length == 0)
    return fail(Failure::InvalidPlan, c->peer, static_cast<int32_t>(block),
                peerName(c->peer) + " gave no memory region for block " + std::to_string(block) + ", which the plan sends it");
  uint32_t id = block;
  uint64_t wlen = len;
  uint32_t rkey = r.rkey;
  if (fault.hits(Fault::Oversize, block) && store->offset(block) + len + 4096 <= store->totalBytes) wlen = len + 4096;
  if (fault.hits(Fault::BadBlock, block)) id = store->blockCount + 7;
  if (fault.hits(Fault::BadRkey, block)) rkey ^= 0x5a5a00u;
  queueFrame(c, kAnnounce, id, store->checksums[block], len);
  if (!flush(c)) return false;
  // Writes of at most c->chunk bytes, all but the last unsignaled; the last carries the immediate and the
  // completion (RC places the earlier ones first).
  const uint64_t base = store->offset(block);
  for (uint64_t off = 0; off < wlen; off += c->chunk) {
    const uint64_t n = wlen - off < c->chunk ? wlen - off : c->chunk;
    const bool last = off + n >= wlen;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(store->base + base + off);
    sge.length = static_cast<uint32_t>(n);
    sge.lkey = localMr->lkey;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = wrId(false, c->peer, block);
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = last ? IBV_SEND_SIGNALED : 0;
    if (last) wr.imm_data = htonl(id);
    wr.wr.rdma.remote_addr = r.addr + off;
    wr.wr.rdma.rkey = rkey;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    int rc = ibv_post_send(c->qp, &wr, &bad);
    if (rc != 0)
      return fail(Failure::Io, c->peer, static_cast<int32_t>(block),
                  "ibv_post_send of block " + std::to_string(block) + " to " + peerName(c->peer) + " failed: " + std::strerror(rc));
  }
  c->credits--;
  c->inflight++;
  out.profile.sendCalls++;
  return true;
}

// Takes completions in batches of kPollBatch, at most kPollRounds batches per call; cqMore says whether more wait.
bool Runner::pollCq() {
  ibv_wc wc[kPollBatch];
  for (int round = 0; round < kPollRounds; round++) {
    int n = ibv_poll_cq(cq, kPollBatch, wc);
    if (n < 0) return fail(Failure::Io, -1, -1, "ibv_poll_cq failed");
    for (int i = 0; i < n && !failed(); i++)
      if (!onCompletion(wc[i])) return false;
    cqMore = n == kPollBatch;
    if (!cqMore) return true;
  }
  return true;
}

bool Runner::onCompletion(const ibv_wc& wc) {
  const bool recv = (wc.wr_id & kRecvBit) != 0;
  const int32_t peer = wrPeer(wc.wr_id);
  Conn* c = peer >= 0 && static_cast<size_t>(peer) < spec.peers.size() ? (recv ? inBy[peer] : outBy[peer]) : nullptr;
  if (c == nullptr) return fail(Failure::Io, -1, -1, "a completion for an unknown queue pair");
  if (wc.status != IBV_WC_SUCCESS) {
    if (recv) {
      const int32_t block = c->dueBlock(spec.expect[peer]);
      return fail(Failure::PeerFailed, peer, block,
                  "the queue pair from " + peerName(peer) + " broke while block " + std::to_string(block) + " was due: " +
                      ibv_wc_status_str(wc.status) + " (a write outside the region given for the block, or with a memory key that does not match, breaks it)");
    }
    const uint32_t block = wrBlock(wc.wr_id);
    std::string why = ibv_wc_status_str(wc.status);
    if (wc.status == IBV_WC_REM_ACCESS_ERR)
      why += ": the receiver's device refused the write (larger than the region it registered for the block, or a memory key that does not match)";
    else if (wc.status == IBV_WC_RETRY_EXC_ERR)
      why += ": no acknowledgement after every retry (the peer is gone)";
    return fail(Failure::PeerFailed, peer, static_cast<int32_t>(block),
                "the RDMA write of block " + std::to_string(block) + " to " + peerName(peer) + " failed: " + why);
  }
  if (recv) {
    out.profile.recvCalls++;
    if (out.profile.firstByteMs < 0) out.profile.firstByteMs = msBetween(t0, Clock::now());
    c->arrived.push_back(Conn::Arrival{ntohl(wc.imm_data), wc.byte_len});
    return settle(c);
  }
  if (c->peerDone) return true;  // Done already accounted for it
  const uint32_t block = wrBlock(wc.wr_id);
  c->inflight--;
  c->sendsLeft--;
  c->inflightBytes -= store->length(block);
  out.bytesSent += store->length(block);
  return pump();
}

// Asynchronous errors on this run's queue pairs (a device that detects a bad write may report it only here).
bool Runner::onAsyncEvent() {
  ibv_async_event ev{};
  while (ibv_get_async_event(dev.ctx, &ev) == 0) {
    Conn* hit = nullptr;
    const bool qpEvent = ev.event_type == IBV_EVENT_QP_FATAL || ev.event_type == IBV_EVENT_QP_REQ_ERR ||
                         ev.event_type == IBV_EVENT_QP_ACCESS_ERR;
    if (qpEvent)
      for (auto& c : conns)
        if (c->qp == ev.element.qp) hit = c.get();
    const ibv_event_type type = ev.event_type;
    ibv_ack_async_event(&ev);
    if (hit == nullptr) continue;
    const int32_t block = hit->outgoing ? -1 : hit->dueBlock(spec.expect[hit->peer]);
    return fail(Failure::PeerFailed, hit->peer, block,
                std::string("the queue pair ") + (hit->outgoing ? "to " : "from ") + peerName(hit->peer) + " broke" +
                    (block >= 0 ? " while block " + std::to_string(block) + " was due" : "") + ": " + ibv_event_type_str(type) +
                    (type == IBV_EVENT_QP_ACCESS_ERR ? " (a write outside the region given for the block, or with a memory key that does not match)" : ""));
  }
  return true;
}
}  // namespace verbs
}  // namespace tg
