/* The raw-TCP limit for the data plane bench: the plainest sender/receiver pair (blocking sockets, kernel-tuned
 * socket buffers, no checksums, no framing) moving a model's bytes from memory to memory the way the data plane
 * does: the sender reads <bytes> of distinct, populated memory and the receiver writes <bytes> of distinct,
 * populated memory (allocated as BlockStore allocates a model, native/src/store.cc), <chunk> bytes per call at most.
 *
 *   tcp_pair recv <port> <bytes> <chunk>        prints "LISTEN <port>", then after <bytes> arrived
 *                                               "RECV <bytes> <first byte ms> <last byte ms> <recv calls>"
 *   tcp_pair send <host> <port> <bytes> <chunk> prints "SEND <bytes> <dial start ms> <connected ms> <send calls>"
 *
 * Port 0 = any. Times are CLOCK_MONOTONIC milliseconds, one clock for every process on the host, so the bench
 * times the pair exactly as it times tidegate: from the sender starting to dial to the receiver holding the last
 * byte. Exit status 0 on success, 1 on a socket error or a short transfer, 2 on bad usage. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* As StoreData's constructor maps a model: anonymous private memory, every page populated. */
static unsigned char* model_memory(size_t bytes) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

int main(int argc, char** argv) {
  if (argc == 5 && strcmp(argv[1], "recv") == 0) {
    long long want = atoll(argv[3]), chunk = atoll(argv[4]);
    if (want <= 0 || chunk <= 0) return fprintf(stderr, "tcp_pair: bytes and chunk must be positive\n"), 2;
    unsigned char* buf = model_memory(want);
    if (buf == NULL) return perror("mmap"), 1;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(argv[2]));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 1) != 0) return perror("bind"), 1;
    socklen_t len = sizeof a;
    getsockname(l, (struct sockaddr*)&a, &len);
    printf("LISTEN %d\n", ntohs(a.sin_port));
    fflush(stdout);
    int c = accept(l, NULL, NULL);
    if (c < 0) return perror("accept"), 1;
    double first = -1;
    long long got = 0, calls = 0;
    while (got < want) {
      ssize_t n = recv(c, buf + got, want - got < chunk ? want - got : chunk, 0);
      if (n <= 0) return fprintf(stderr, "tcp_pair: recv ended at %lld of %lld bytes\n", got, want), 1;
      if (first < 0) first = now_ms();
      got += n;
      calls++;
    }
    printf("RECV %lld %.6f %.6f %lld\n", got, first, now_ms(), calls);
    return 0;
  }
  if (argc == 6 && strcmp(argv[1], "send") == 0) {
    long long want = atoll(argv[4]), chunk = atoll(argv[5]);
    if (want <= 0 || chunk <= 0) return fprintf(stderr, "tcp_pair: bytes and chunk must be positive\n"), 2;
    unsigned char* buf = model_memory(want);
    if (buf == NULL) return perror("mmap"), 1;
    for (long long i = 0; i < want; i++) buf[i] = (unsigned char)(i * 131 + (i >> 12));
    double start = now_ms();
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(argv[3]));
    inet_pton(AF_INET, argv[2], &a.sin_addr);
    if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) return perror("connect"), 1;
    double connected = now_ms();
    long long sent = 0, calls = 0;
    while (sent < want) {
      ssize_t n = send(s, buf + sent, want - sent < chunk ? want - sent : chunk, 0);
      if (n <= 0) return perror("send"), 1;
      sent += n;
      calls++;
    }
    close(s);
    printf("SEND %lld %.6f %.6f %lld\n", sent, start, connected, calls);
    return 0;
  }
  fprintf(stderr, "usage: tcp_pair recv <port> <bytes> <chunk> | tcp_pair send <host> <port> <bytes> <chunk>\n");
  return 2;
}
