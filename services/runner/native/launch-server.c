/*
 * ephemera-launch --serve: the resident launcher. The process driver starts it once and asks
 * it to start each step, so a step is forked from this small process rather than from the
 * runner's heap (a fork copies the page tables of the whole process: milliseconds of the
 * runner's CPU per step). Each step is this same program, executed again with the step's
 * arguments and environment (so `ps` and the runner's clean-up of leftovers see it as
 * before), in its own session and process group, its stdout and stderr one pipe whose bytes
 * are passed on to the runner.
 *
 * The channel is this program's stdin (requests) and stdout (frames), little-endian:
 *   request  u32 length, u32 id, then length - 4 bytes: the arguments, NUL-terminated,
 *            an empty string, then the environment's NAME=value strings, NUL-terminated
 *   frame    u8 type, u32 id, u32 length, then length bytes:
 *            'P' u32 pid             the step runs (as itself, in its own session: its group is this pid)
 *            'O' bytes               what it wrote to stdout or stderr
 *            'X' i32 code, i32 sig   it ended: its exit code (-1 if killed) and signal (0 if none)
 *            'E' message             it could not be started
 * Its output is passed on in order, and all of it before its 'X'. The runner signals a
 * step's group itself. When the runner goes (its end of the channel closes, or it dies:
 * parent-death signal), every step is killed and this program exits; each step also dies
 * with this program (its own parent-death signal).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch-server.h"

#define MAX_STEPS 1024
#define MAX_REQUEST (8u << 20)
#define MAX_STRINGS 4096
#define CHUNK 65536

struct step { uint32_t id; pid_t pid; int out; };
static struct step steps[MAX_STEPS];
static int nsteps;
static int chld[2] = { -1, -1 };

static void on_chld(int sig) {
  (void)sig;
  int saved = errno;
  if (write(chld[1], "c", 1) < 0) { /* full: a wake-up is pending already */ }
  errno = saved;
}

static void put32(unsigned char *p, uint32_t v) { p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24; }
static uint32_t get32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static void write_all(const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t n = write(1, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(0); /* the runner is gone: so are its steps (parent-death signal) */
    p += n;
    len -= (size_t)n;
  }
}

static void frame(char type, uint32_t id, const void *data, uint32_t len) {
  unsigned char head[9];
  head[0] = (unsigned char)type;
  put32(head + 1, id);
  put32(head + 5, len);
  write_all(head, sizeof head);
  if (len) write_all(data, len);
}

/* Passes on what the step's pipe holds now; at its end, closes it. Returns whether it ended. */
static int pass_output(struct step *s) {
  static char buf[CHUNK];
  for (;;) {
    ssize_t n = read(s->out, buf, sizeof buf);
    if (n > 0) { frame('O', s->id, buf, (uint32_t)n); continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    close(s->out);
    s->out = -1;
    return 1;
  }
}

/* Starts one step: this program again, with `args` and `env`, its output to a pipe kept here. */
static void start(uint32_t id, char **args, char **env) {
  if (nsteps == MAX_STEPS) { const char *m = "too many steps at once"; frame('E', id, m, (uint32_t)strlen(m)); return; }
  /* `execd` closes (close-on-exec) once the step runs as itself, or carries exec's errno. */
  int out[2], execd[2];
  if (pipe2(out, O_CLOEXEC) < 0) { const char *m = strerror(errno); frame('E', id, m, (uint32_t)strlen(m)); return; }
  if (pipe2(execd, O_CLOEXEC) < 0) {
    const char *m = strerror(errno);
    close(out[0]);
    close(out[1]);
    frame('E', id, m, (uint32_t)strlen(m));
    return;
  }
  pid_t server = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    const char *m = strerror(errno);
    close(out[0]);
    close(out[1]);
    close(execd[0]);
    close(execd[1]);
    frame('E', id, m, (uint32_t)strlen(m));
    return;
  }
  if (pid == 0) {
    /* Dies with this program, from before it runs anything (the setting survives exec). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != server) _exit(1);
    /* What this program set up for itself is not the step's: ignored signals survive exec. */
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    setsid();
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0) {
      int e = errno;
      if (write(execd[1], &e, sizeof e) < 0) { /* the server learns it from the exit */ }
      _exit(127);
    }
    execve("/proc/self/exe", args, env);
    int e = errno;
    if (write(execd[1], &e, sizeof e) < 0) { /* the server learns it from the exit */ }
    _exit(127);
  }
  close(out[1]);
  close(execd[1]);
  /* Told only once it runs as the step, in its own session: its command line is the step's and its group can be signalled. */
  int e = 0;
  ssize_t n;
  while ((n = read(execd[0], &e, sizeof e)) < 0 && errno == EINTR) {}
  close(execd[0]);
  if (n > 0) {
    /* Not started: the child has exited (reaped with the others, unknown there). */
    char m[256];
    snprintf(m, sizeof m, "%s", strerror(e));
    close(out[0]);
    frame('E', id, m, (uint32_t)strlen(m));
    return;
  }
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  steps[nsteps++] = (struct step){ id, pid, out[0] };
  unsigned char p[4];
  put32(p, (uint32_t)pid);
  frame('P', id, p, sizeof p);
}

/* The steps that ended: all their output, then how they ended. */
static void reap(void) {
  int ws;
  pid_t pid;
  while ((pid = waitpid(-1, &ws, WNOHANG)) > 0) {
    for (int i = 0; i < nsteps; i++) {
      if (steps[i].pid != pid) continue;
      /* Its processes are gone (its pid namespace, or the runner kills its group): what they wrote is in the pipe. */
      if (steps[i].out >= 0) { pass_output(&steps[i]); if (steps[i].out >= 0) close(steps[i].out); }
      unsigned char x[8];
      put32(x, WIFEXITED(ws) ? (uint32_t)WEXITSTATUS(ws) : (uint32_t)-1);
      put32(x + 4, WIFSIGNALED(ws) ? (uint32_t)WTERMSIG(ws) : 0);
      frame('X', steps[i].id, x, sizeof x);
      steps[i] = steps[--nsteps];
      break;
    }
  }
}

/* One request from `buf` (its u32 id first); 0 when malformed. */
static int request(const char *self, unsigned char *buf, uint32_t len) {
  static char *args[MAX_STRINGS + 2], *env[MAX_STRINGS + 1];
  if (len < 5 || buf[len - 1] != 0) return 0;
  uint32_t id = get32(buf);
  int nargs = 0, nenv = 0, in_env = 0;
  args[nargs++] = (char *)self;
  for (uint32_t off = 4; off < len;) {
    char *s = (char *)buf + off;
    size_t n = strlen(s);
    off += (uint32_t)n + 1;
    if (!in_env && n == 0) { in_env = 1; continue; }
    if (in_env) { if (nenv == MAX_STRINGS) return 0; env[nenv++] = s; }
    else { if (nargs == MAX_STRINGS + 1) return 0; args[nargs++] = s; }
  }
  if (!in_env) return 0;
  args[nargs] = NULL;
  env[nenv] = NULL;
  start(id, args, env);
  return 1;
}

int serve(const char *self) {
  /* Dies with the runner; a runner already gone leaves nothing to serve. */
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(chld, O_CLOEXEC | O_NONBLOCK) < 0) return 1;
  struct sigaction sa = { 0 };
  sa.sa_handler = on_chld;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);

  unsigned char *in = NULL;
  size_t have = 0, cap = 0;
  static struct pollfd fds[MAX_STEPS + 2];
  for (;;) {
    int n = 0;
    fds[n++] = (struct pollfd){ .fd = 0, .events = POLLIN };
    fds[n++] = (struct pollfd){ .fd = chld[0], .events = POLLIN };
    for (int i = 0; i < nsteps; i++) fds[n++] = (struct pollfd){ .fd = steps[i].out, .events = POLLIN };
    if (poll(fds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    /* Output first, so a step's bytes are passed on before its end is. */
    for (int i = 0; i < nsteps; i++) {
      if (steps[i].out >= 0 && fds[2 + i].revents) pass_output(&steps[i]);
    }
    if (fds[1].revents) {
      char drain[64];
      while (read(chld[0], drain, sizeof drain) > 0) {}
      reap();
    }
    if (fds[0].revents) {
      if (have == cap) {
        cap = cap ? cap * 2 : CHUNK;
        if (cap > MAX_REQUEST + 4) cap = MAX_REQUEST + 4;
        if (have == cap || !(in = realloc(in, cap))) break;
      }
      ssize_t r = read(0, in + have, cap - have);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break; /* the runner closed the channel */
      have += (size_t)r;
      size_t used = 0;
      while (have - used >= 4) {
        uint32_t len = get32(in + used);
        if (len > MAX_REQUEST) goto done;
        if (have - used - 4 < len) break;
        if (!request(self, in + used + 4, len)) goto done;
        used += 4 + len;
      }
      memmove(in, in + used, have - used);
      have -= used;
    }
  }
done:
  /* The runner is gone, or spoke nonsense: its steps go with it. */
  for (int i = 0; i < nsteps; i++) kill(-steps[i].pid, SIGKILL);
  return 0;
}
