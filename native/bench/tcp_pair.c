/* The raw-TCP limit for the data plane bench: the plainest sender/receiver pair (blocking sockets, 8 MiB buffer,
 * no checksums, no framing). `tcp_pair recv <port> <bytes>` prints "LISTEN <port>" then, after receiving <bytes>,
 * "RECV <bytes> <seconds>"; `tcp_pair send <host> <port> <bytes>` writes <bytes> and exits. Port 0 = any. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF (8u << 20)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  char* buf = malloc(BUF);
  if (buf == NULL) return 1;
  memset(buf, 0x5a, BUF);
  if (argc == 4 && strcmp(argv[1], "recv") == 0) {
    long long want = atoll(argv[3]);
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
    double t0 = 0;
    long long got = 0;
    while (got < want) {
      ssize_t n = recv(c, buf, BUF, 0);
      if (n <= 0) return fprintf(stderr, "recv ended at %lld\n", got), 1;
      if (got == 0) t0 = now_s();
      got += n;
    }
    printf("RECV %lld %.6f\n", got, now_s() - t0);
    return 0;
  }
  if (argc == 5 && strcmp(argv[1], "send") == 0) {
    long long want = atoll(argv[4]);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(argv[3]));
    inet_pton(AF_INET, argv[2], &a.sin_addr);
    if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) return perror("connect"), 1;
    long long sent = 0;
    while (sent < want) {
      ssize_t n = send(s, buf, want - sent < BUF ? want - sent : BUF, 0);
      if (n <= 0) return perror("send"), 1;
      sent += n;
    }
    close(s);
    return 0;
  }
  fprintf(stderr, "usage: tcp_pair recv <port> <bytes> | tcp_pair send <host> <port> <bytes>\n");
  return 2;
}
