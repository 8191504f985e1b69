// Internals of the verbs transport (RDMA over reliable-connected queue pairs). The design, in short:
//
// - Control channel: the TCP connection the TCP transport would use for data (same listener, same dial phase,
//   net_util.cc) carries only small frames: the handshake (queue pair number, PSN, GID, and the receiver's memory
//   regions), block announcements {block, checksum, length}, credits, heartbeats and Done.
// - Data: one RC queue pair per directed (sender → receiver) pair of nodes. A block moves straight from the
//   sender's block store into the receiver's as RDMA WRITEs of at most the smaller device's largest message (soft-RoCE
//   allows 8 MiB), the last one WITH IMMEDIATE (the block id): RC delivers in order, so when that one completes at
//   the receiver the whole block is there. WRITE
//   (not SEND/RECV) because the receiver decides where each block lands once, when it registers the block's
//   memory, and the sender needs no receive buffer matched to its order; the immediate still consumes one posted
//   receive, which is what makes credits exact. No copy on either side.
// - Bounds: the receiver registers every block it expects as its own memory region (REMOTE_WRITE) and hands the
//   sender one {addr, rkey, length} per block, so a write that is larger than the block, or carries a key that does
//   not match, is refused by the receiving device (remote access error) instead of landing in a neighbour block.
// - Credits: a receiver posts at most kWindow receives per sender and grants one credit per receive (in pull mode,
//   λScale's binomial steps, one receive per requested block). A sender writes only with a credit in hand, so it
//   never overruns the receiver (no receiver-not-ready retries); one that waits stallMs for a credit reports the
//   receiver as stalled.
// - Completions: one completion queue per run with a completion channel, polled in the transport's thread (the
//   loop below) in batches of kPollBatch.
// - Checksums: the receiver checks each block against the announced checksum when its write completes.
#pragma once
#include <infiniband/verbs.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "checksum.h"
#include "net_util.h"
#include "transport.h"

namespace tg {
namespace verbs {
constexpr uint32_t kMagic = 0x56444754;     // "TGDV": the verbs control channel
constexpr uint32_t kTcpMagic = 0x50444754;  // "TGDP": the TCP transport's frames (a peer running TCP)
constexpr uint16_t kVersion = 1;
enum FrameType : uint16_t { kHello = 1, kHelloAck = 2, kAnnounce = 3, kCredit = 4, kHeartbeat = 5, kDone = 6 };
#pragma pack(push, 1)
/** Control frame header. Hello/HelloAck carry a body of `length` bytes; for Announce `length` is the block's. */
struct Frame {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t block;     // Hello: the dialing node; HelloAck: initial credits; Announce: block id; Credit: count
  uint32_t checksum;  // Announce: the block's checksum; HelloAck: number of regions in the body
  uint64_t length;
  uint64_t runId;
};
/** One side of a queue pair, as the other side needs it to connect. */
struct QpInfo {
  uint32_t qpn;
  uint32_t psn;
  uint16_t lid;
  uint8_t mtu;  // enum ibv_mtu
  uint8_t reserved;
  uint8_t gid[16];
  uint64_t maxMsg;  // the device's largest message: a block moves in writes of at most min(both sides)
};
/** Where the sender may write one block: the receiver's registered memory for exactly that block. */
struct Region {
  uint32_t block;
  uint32_t rkey;
  uint64_t addr;
  uint64_t length;
};
#pragma pack(pop)
static_assert(sizeof(Frame) == 32, "frame header is 32 bytes");

constexpr int kWindow = 8;         // receives (credits) a receiver keeps posted per sender
constexpr int kMaxInflight = 2;    // writes a sender keeps in flight per queue pair
constexpr int kPollBatch = 32;     // completions taken per ibv_poll_cq call
constexpr int kPollRounds = 8;     // ibv_poll_cq calls per loop turn before sockets get their turn again
constexpr uint64_t kMaxBody = 64ull << 20;
constexpr uint64_t kVerifySlice = 1ull << 20;  // checksum bytes per slice: the loop turns (heartbeats, credits) between slices
constexpr int kVerifySlices = 1;               // slices per loop turn  // largest handshake body accepted (region tables)

using Clock = std::chrono::steady_clock;
inline double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/** The opened device and the port and GID every queue pair uses. Owned by the transport, shared by its runs. */
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 1;
  int gidIndex = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  uint64_t maxMsg = 0;
  uint32_t maxQpWr = 0;
  std::string name;
  ~Device();
};
/** Opens `dev`: context, protection domain, an active port and a GID (an IPv4 RoCE v2 one when there is one). */
std::string openDevice(ibv_device* dev, Device& d);

/**
 * Faults the conformance suite injects to make one node misbehave (TIDEGATE_VERBS_FAULT=kind[:block], read at each
 * run's start; test use only): a sender that writes more than the block (oversize), names a block id the model does
 * not have (bad-block), or uses a memory key that does not match (bad-rkey); a receiver that corrupts a block in
 * its memory after the write and before the checksum (corrupt), or never posts a receive (no-credits).
 */
enum class Fault { None, Oversize, BadBlock, BadRkey, Corrupt, NoCredits };
struct FaultSpec {
  Fault kind = Fault::None;
  int64_t block = -1;  // -1: the first block it can apply to
  bool hits(Fault f, uint32_t b) const { return kind == f && (block < 0 || block == static_cast<int64_t>(b)); }
};
FaultSpec faultFromEnv();

struct Conn {
  int fd = -1;
  bool outgoing = false;  // this node dialed: it sends, the peer receives
  int32_t peer = -1;
  bool helloSeen = false;  // incoming: the dialer's Hello arrived (outgoing: true from the dial)
  bool ready = false;      // the queue pair is in RTS (outgoing: the receiver's regions are known)
  bool finished = false;
  ibv_qp* qp = nullptr;
  uint32_t psn = 0;
  uint64_t chunk = 0;     // bytes per write: min of both devices' largest message
  uint32_t sendSlots = 0; // the queue pair's send queue depth
  // control channel
  std::vector<uint8_t> wq;
  size_t wOff = 0;
  Frame rHdr{};
  size_t rHdrOff = 0;
  std::vector<uint8_t> rBody;
  size_t rBodyOff = 0;
  bool inBody = false;
  Clock::time_point lastHeard, lastHeartbeat, accepted;
  // sender side
  std::vector<Region> regions;  // by block; length 0 = no region given
  int credits = 0;
  int inflight = 0;
  uint64_t inflightBytes = 0;  // bytes of writes posted and not yet completed
  size_t sendsLeft = 0;        // writes to this peer not yet completed
  bool peerDone = false;       // the receiver said Done: it verified every block from here
  bool waitingCredit = false;  // a block is ready for this peer and it has given no credit
  Clock::time_point creditWaitSince;
  // receiver side
  size_t nextExpect = 0;   // blocks verified from this peer
  size_t matched = 0;      // write completions matched with their announcements
  size_t announced = 0;    // announcements received from this peer
  size_t granted = 0;      // receives posted (credits granted) in total
  std::deque<Frame> announces;
  struct Arrival {
    uint32_t block;
    uint32_t bytes;
  };
  std::deque<Arrival> arrived;
  bool pending() const { return wOff < wq.size(); }
  /** Receiver side: the block whose write has not completed yet (every earlier one has), or -1. */
  int32_t dueBlock(const std::vector<uint32_t>& expect) const {
    const size_t i = matched + arrived.size();
    return i < expect.size() ? static_cast<int32_t>(expect[i]) : -1;
  }
};

class Runner : OutcomeRecorder {
 public:
  Runner(Device& d, const RunSpec& s, std::shared_ptr<StoreData> st, RunSink& k, int listenFd, int wakeFd)
      : dev(d), spec(s), store(std::move(st)), sink(k), lfd(listenFd), wfd(wakeFd) {}
  ~Runner();  // releases queue pairs, the completion queue and channel, memory regions and sockets
  RunOutcome go();

 private:
  Device& dev;
  const RunSpec& spec;
  std::shared_ptr<StoreData> store;
  RunSink& sink;
  int lfd, wfd;
  FaultSpec fault;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  unsigned unackedEvents = 0;
  bool cqMore = false;
  ibv_mr* localMr = nullptr;         // the whole store, source of this node's writes
  std::vector<ibv_mr*> blockMr;      // per block this node receives: the region a sender may write
  std::vector<std::unique_ptr<Conn>> conns;
  std::vector<Conn*> outBy, inBy;
  struct Lane {
    std::vector<SendOp> ops;
    size_t idx = 0;
    Conn* last = nullptr;
  };
  std::vector<Lane> lanes;
  size_t inRemaining = 0;
  Clock::time_point t0, loopStart;
  // pull mode (λScale binomial steps): one block requested at a time, in step order
  size_t recvIdx = 0;
  int outstanding = 0;
  // Blocks whose writes completed, being checksummed a slice at a time (in arrival order) so a long block never
  // keeps the loop from its heartbeats.
  struct Verify {
    Conn* conn;
    uint32_t block;
    uint32_t expected;
    uint64_t length;
    uint64_t done;
    StreamingChecksum sum;
  };
  std::deque<Verify> verifying;
  bool verifyStep();
  bool accept(Conn* c, uint32_t block, uint32_t got);

  std::string peerName(int32_t p) const { return peerLabel(spec, p); }
  // setup (verbs_qp.cc)
  bool registerMemory();
  bool createQueue();
  uint32_t sendQueueDepth() const;
  bool makeQp(Conn* c);
  bool connectQp(Conn* c, const QpInfo& remote);
  QpInfo localInfo(const Conn* c) const;
  bool postRecv(Conn* c);
  // control channel (verbs_runner.cc)
  bool connectAll();
  void queueFrame(Conn* c, uint16_t type, uint32_t block, uint32_t crc, uint64_t len, const void* body = nullptr, size_t bodyLen = 0);
  bool flush(Conn* c);
  bool onReadable(Conn* c);
  bool onFrame(Conn* c);
  bool onHello(Conn* c);
  bool onHelloAck(Conn* c);
  bool onEof(Conn* c);
  bool grant(Conn* c);
  bool requestNext();
  // data path
  bool pump();
  bool pumpLane(Lane& l);
  bool postWrite(Conn* c, uint32_t block);
  bool pollCq();
  bool onCompletion(const ibv_wc& wc);
  bool settle(Conn* c);
  bool onAsyncEvent();
  bool housekeeping(Clock::time_point now);
  bool heartbeats(Clock::time_point now);
  void finishIncoming(Conn* c);
  bool done() const;
};
}  // namespace verbs
}  // namespace tg
