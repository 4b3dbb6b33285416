/*
 * ephemera-launch: starts one step script in its own mount (and pid) namespace, with its
 * private views mounted, and reports how it ended. The runner does everything else (the
 * step's inputs, outputs and report); per step this is the only program it starts, and
 * it does its mounts itself: no process per view.
 *
 *   ephemera-launch --serve     (the resident launcher: see launch-server.c)
 *   ephemera-launch --rundir DIR [--pidns] [--userns] [--nice N] [--uid U --gid G]
 *                   [--netns PATH [--resolv FILE] | --newnet]
 *                   [--tmpfs-size BYTES] [--readonly-host] [--limit BYTES]
 *                   [--view DIR]... [--file N:DEST]... [--output PATH]...
 *                   [--bind SRC DEST | --bind-ro SRC DEST]... [--chdir DIR] [-- COMMAND ARG...]
 *
 * With a COMMAND (kube-sim's containers), it is run instead of the run directory's script,
 * found on the environment's PATH, in --chdir (default /tmp); --bind and --bind-ro show a
 * host file or directory SRC (opened before any view can hide it) at DEST, writable or
 * read-only, mounted in order after the views were given to the script's user (so a
 * bind's files keep their owners) and left writable by --readonly-host (--bind only).
 *
 * The step's network: --netns joins a namespace the runner prepared (one of its pool, wired
 * to the runner's bridge; FILE is bind-mounted over /etc/resolv.conf), --newnet makes an
 * empty one (loopback only, brought up here); neither: the runner's own.
 *
 * DIR (made by the runner, mode 0700) holds `script`, the input files `in/N`, and, with no
 * tmpfs size, the bind sources `view-I`. The views are mounted in order (ancestors first,
 * /tmp last), the input files and the script (/tmp/.ephemera/script) copied in, the views
 * given to the script's user, every other mount made read-only (--readonly-host), and the
 * script run through its #! line with this program's environment, in /tmp. After it ends,
 * the step's other processes are killed, the views stop following symlinks (a script
 * running as another user cannot make root read a file for it), and each output is copied
 * to DIR/out/I (at most --limit + 1 bytes). Last, DIR/status tells the runner, one fact a
 * line (written to a temporary file, then renamed):
 *   exit CODE | signal NUMBER | exec ERRNO MESSAGE | error MESSAGE | cancelled
 *   output I SIZE | output I missing | output I toolarge SIZE
 *   full DIR
 * A SIGTERM (the runner stops the step) is passed to the script's process group; a script
 * not started yet never starts. The launcher dies with the runner (parent-death signal),
 * and with it the pid namespace and everything in it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch-server.h"

#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256
#endif

#define MAX_ITEMS 256
#define SCRIPT_DIR "/tmp/.ephemera"
#define SCRIPT_PATH "/tmp/.ephemera/script"

static const char *rundir;
static int pidns, userns, newnet, readonly_host, nice_level;
static const char *netns_path, *resolv_path;
static long uid = -1, gid = -1;
static unsigned long long tmpfs_size, limit = 1024 * 1024;
static const char *views[MAX_ITEMS];
static int nviews;
static const char *files[MAX_ITEMS]; /* "N:DEST" */
static int nfiles;
static const char *outputs[MAX_ITEMS];
static int noutputs;
struct bind { const char *src, *dest; int ro, fd; };
static struct bind binds[MAX_ITEMS];
static int nbinds;
static char **command;
static const char *workdir = "/tmp";

static int dirfd_run = -1;
static char status[1 << 16];
static size_t status_len;
static volatile sig_atomic_t terminated;
static volatile pid_t script_pgid;

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(status + status_len, sizeof status - status_len, fmt, ap);
  va_end(ap);
  if (n > 0) status_len += (size_t)n < sizeof status - status_len ? (size_t)n : sizeof status - status_len - 1;
}

/* The status file, atomically; the runner reads it after this program has exited. */
static void write_status(void) {
  if (dirfd_run < 0) return;
  int fd = openat(dirfd_run, "status.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  size_t off = 0;
  while (off < status_len) {
    ssize_t w = write(fd, status + off, status_len - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  close(fd);
  renameat(dirfd_run, "status.tmp", dirfd_run, "status");
}

static void fail(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++) if (*p == '\n') *p = ' ';
  status_len = 0;
  say("error %s\n", msg);
  write_status();
  exit(1);
}

static void usage(const char *why) {
  fprintf(stderr, "ephemera-launch: %s\n", why);
  exit(2);
}

static int within(const char *path, const char *dir) {
  size_t n = strlen(dir);
  if (strcmp(dir, "/") == 0) return 1;
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* mkdir -p, as the caller (root): the directories a view or an input file needs. */
static int mkdirs(const char *path, mode_t mode) {
  char buf[4096];
  if (strlen(path) >= sizeof buf) { errno = ENAMETOOLONG; return -1; }
  strcpy(buf, path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, mode) < 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, mode) < 0 && errno != EEXIST) return -1;
  return 0;
}

static int copy_fd(int in, int out, unsigned long long max, unsigned long long *copied) {
  char buf[65536];
  *copied = 0;
  for (;;) {
    size_t want = sizeof buf;
    if (max && max - *copied < want) want = (size_t)(max - *copied);
    if (max && want == 0) return 0;
    ssize_t r = read(in, buf, want);
    if (r < 0) { if (errno == EINTR) continue; return -1; }
    if (r == 0) return 0;
    for (ssize_t off = 0; off < r;) {
      ssize_t w = write(out, buf + off, (size_t)(r - off));
      if (w < 0) { if (errno == EINTR) continue; return -1; }
      off += w;
    }
    *copied += (unsigned long long)r;
  }
}

/* A file of the run directory (opened before the views hid it) copied to `dest`. */
static void install(const char *src, const char *dest, mode_t mode) {
  char parent[4096];
  snprintf(parent, sizeof parent, "%s", dest);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) { *slash = '\0'; if (mkdirs(parent, 0755) < 0) fail("cannot prepare the step: cannot create %s: %s", parent, strerror(errno)); }
  int in = openat(dirfd_run, src, O_RDONLY | O_CLOEXEC);
  if (in < 0) fail("cannot prepare the step: cannot read %s of the run directory: %s", src, strerror(errno));
  int out = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (out < 0) fail("cannot prepare the step: cannot write %s: %s", dest, strerror(errno));
  unsigned long long n;
  if (copy_fd(in, out, 0, &n) < 0) fail("cannot prepare the step: cannot write %s: %s", dest, strerror(errno));
  if (fchmod(out, mode) < 0) fail("cannot prepare the step: cannot set the mode of %s: %s", dest, strerror(errno));
  close(in);
  close(out);
}

static int chown_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb; (void)flag; (void)ftw;
  return lchown(path, (uid_t)uid, (gid_t)gid) < 0 ? -1 : 0;
}

static void mount_views(void) {
  for (int i = 0; i < nviews; i++) {
    const char *dir = views[i];
    if (mkdirs(dir, 0755) < 0) fail("cannot prepare the step: cannot create %s: %s", dir, strerror(errno));
    if (tmpfs_size) {
      char options[256];
      int n = snprintf(options, sizeof options, "size=%llu,mode=%s", tmpfs_size, strcmp(dir, "/tmp") == 0 ? "1777" : "0755");
      if (uid >= 0) snprintf(options + n, sizeof options - (size_t)n, ",uid=%ld,gid=%ld", uid, gid);
      if (mount("ephemera-step", dir, "tmpfs", MS_NOSUID | MS_NODEV, options) < 0)
        fail("cannot prepare the step: cannot mount a private view over %s: %s", dir, strerror(errno));
    } else {
      char source[64];
      snprintf(source, sizeof source, "view-%d", i);
      if (mkdirat(dirfd_run, source, 0755) < 0 && errno != EEXIST)
        fail("cannot prepare the step: cannot create the source of the view over %s: %s", dir, strerror(errno));
      char path[128];
      snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dirfd_run, source);
      if (mount(path, dir, NULL, MS_BIND, NULL) < 0)
        fail("cannot prepare the step: cannot mount a private view over %s: %s", dir, strerror(errno));
    }
  }
}

/* `\040`-style escapes of /proc/self/mountinfo. */
static void unescape(char *s) {
  char *out = s;
  for (char *p = s; *p; p++) {
    if (p[0] == '\\' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
      *out++ = (char)(((p[1] - '0') << 6) | ((p[2] - '0') << 3) | (p[3] - '0'));
      p += 3;
    } else {
      *out++ = *p;
    }
  }
  *out = '\0';
}

/* Every mount but the views and the run directory read-only: the script writes nowhere else. */
static void make_host_readonly(void) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f) fail("cannot prepare the step: cannot make the host filesystem read-only for the script (cannot read the mount table: %s)", strerror(errno));
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    char *fields[7];
    int n = 0;
    for (char *tok = strtok(line, " "); tok && n < 7; tok = strtok(NULL, " ")) fields[n++] = tok;
    if (n < 7) continue;
    char *path = fields[4];
    unescape(path);
    /* The runners' namespace handles (nsfs): not files a script can write, and many. */
    int keep = within(path, rundir) || strncmp(path, "/run/netns/", 11) == 0;
    for (int i = 0; i < nviews && !keep; i++) keep = within(path, views[i]);
    for (int i = 0; i < nbinds && !keep; i++) keep = !binds[i].ro && within(path, binds[i].dest);
    if (keep) continue;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
    int ro = 0;
    for (char *opt = strtok(fields[5], ","); opt; opt = strtok(NULL, ",")) {
      if (!strcmp(opt, "ro")) ro = 1;
      else if (!strcmp(opt, "nosuid")) flags |= MS_NOSUID;
      else if (!strcmp(opt, "nodev")) flags |= MS_NODEV;
      else if (!strcmp(opt, "noexec")) flags |= MS_NOEXEC;
      else if (!strcmp(opt, "noatime")) flags |= MS_NOATIME;
      else if (!strcmp(opt, "nodiratime")) flags |= MS_NODIRATIME;
      else if (!strcmp(opt, "relatime")) flags |= MS_RELATIME;
      else if (!strcmp(opt, "nosymfollow")) flags |= MS_NOSYMFOLLOW;
    }
    if (ro) continue;
    /* A mount point listed twice (one over the other): the remount reaches the top one. */
    if (mount(NULL, path, NULL, flags, NULL) < 0 && errno != ENOENT)
      fail("cannot prepare the step: cannot make the host filesystem read-only for the script (at %s: %s); "
           "EPHEMERA_STEP_HOST_READONLY=false on the runner leaves it writable", path, strerror(errno));
  }
  free(line);
  fclose(f);
}

static void on_term(int sig) {
  (void)sig;
  terminated = 1;
  if (script_pgid > 0) kill(-script_pgid, SIGTERM);
}

/* Runs the script; returns its wait status. Exec failures are said in the status. */
static int run_script(char **envp, int *exec_failed) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0) fail("cannot start the script: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) fail("cannot start the script: %s", strerror(errno));
  if (pid == 0) {
    close(pipefd[0]);
    setpgid(0, 0);
    if (chdir(workdir) < 0) goto failed;
    if (uid >= 0) {
      if (setgroups(0, NULL) < 0 || setgid((gid_t)gid) < 0 || setuid((uid_t)uid) < 0) goto failed;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (terminated) _exit(143);
    char *argv[] = { SCRIPT_PATH, NULL };
    if (command) execvpe(command[0], command, envp);
    else execvpe(SCRIPT_PATH, argv, envp);
  failed:;
    int e = errno;
    if (write(pipefd[1], &e, sizeof e) < 0) _exit(127);
    _exit(127);
  }
  setpgid(pid, pid);
  script_pgid = pid;
  if (terminated) kill(-pid, SIGTERM);
  close(pipefd[1]);
  int e = 0;
  ssize_t r;
  do r = read(pipefd[0], &e, sizeof e); while (r < 0 && errno == EINTR);
  close(pipefd[0]);
  *exec_failed = r == sizeof e ? e : 0;
  int wstatus = 0;
  for (;;) {
    pid_t w = waitpid(-1, &wstatus, 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) fail("lost the script: %s", strerror(errno));
  }
  /* What the script left running ends with it. */
  if (pidns) kill(-1, SIGKILL);
  else kill(-pid, SIGKILL);
  script_pgid = 0;
  return wstatus;
}

static void collect_outputs(void) {
  if (mkdirat(dirfd_run, "out", 0700) < 0 && errno != EEXIST) fail("cannot collect the outputs: %s", strerror(errno));
  for (int i = 0; i < noutputs; i++) {
    struct stat st;
    if (stat(outputs[i], &st) < 0 || !S_ISREG(st.st_mode)) { say("output %d missing\n", i); continue; }
    if ((unsigned long long)st.st_size > limit) { say("output %d toolarge %lld\n", i, (long long)st.st_size); continue; }
    int in = open(outputs[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (in < 0) { say("output %d missing\n", i); continue; }
    char name[32];
    snprintf(name, sizeof name, "out/%d", i);
    int out = openat(dirfd_run, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) fail("cannot collect the outputs: %s", strerror(errno));
    unsigned long long n;
    /* It may have grown since the stat: one byte past the limit tells. */
    if (copy_fd(in, out, limit + 1, &n) < 0) fail("cannot collect output %d: %s", i, strerror(errno));
    close(in);
    close(out);
    if (n > limit) say("output %d toolarge %llu\n", i, n);
    else say("output %d %llu\n", i, n);
  }
}

/* The --bind sources, opened while every one is in sight (one may lie under the host's /tmp). */
static void open_binds(void) {
  for (int i = 0; i < nbinds; i++) {
    binds[i].fd = open(binds[i].src, O_PATH | O_CLOEXEC);
    if (binds[i].fd < 0) fail("cannot prepare the step: cannot open %s to show it at %s: %s", binds[i].src, binds[i].dest, strerror(errno));
  }
}

static void mount_binds(void) {
  for (int i = 0; i < nbinds; i++) {
    const struct bind *b = &binds[i];
    struct stat st;
    if (fstat(b->fd, &st) < 0) fail("cannot prepare the step: cannot read %s: %s", b->src, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
      if (mkdirs(b->dest, 0755) < 0) fail("cannot prepare the step: cannot create %s: %s", b->dest, strerror(errno));
    } else {
      char parent[4096];
      snprintf(parent, sizeof parent, "%s", b->dest);
      char *slash = strrchr(parent, '/');
      if (slash && slash != parent) { *slash = '\0'; if (mkdirs(parent, 0755) < 0) fail("cannot prepare the step: cannot create %s: %s", parent, strerror(errno)); }
      int fd = open(b->dest, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) fail("cannot prepare the step: cannot create %s: %s", b->dest, strerror(errno));
      close(fd);
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", b->fd);
    if (mount(path, b->dest, NULL, MS_BIND | MS_REC, NULL) < 0)
      fail("cannot prepare the step: cannot show %s at %s: %s", b->src, b->dest, strerror(errno));
    if (b->ro && mount(NULL, b->dest, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
      fail("cannot prepare the step: cannot make %s read-only: %s", b->dest, strerror(errno));
    close(b->fd);
  }
}

static void note_full_views(void) {
  if (!tmpfs_size) return;
  for (int i = 0; i < nviews; i++) {
    struct statfs s;
    if (statfs(views[i], &s) == 0 && (unsigned long long)s.f_bavail * (unsigned long long)s.f_bsize < 64 * 1024) say("full %s\n", views[i]);
  }
}

/* Pid 1 of the step's pid namespace (or the step's parent without one). */
static int step(char **envp) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  struct sigaction sa = { 0 };
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  if (pidns && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    fail("cannot prepare the step: cannot mount /proc: %s", strerror(errno));
  /* Before the views: the file may lie under /tmp (the runner's workdir). */
  open_binds();
  if (resolv_path && mount(resolv_path, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0)
    fail("cannot prepare the step: cannot mount its resolver configuration over /etc/resolv.conf: %s", strerror(errno));
  mount_views();
  for (int i = 0; i < nfiles; i++) {
    char src[64];
    const char *colon = strchr(files[i], ':');
    snprintf(src, sizeof src, "in/%.*s", (int)(colon - files[i]), files[i]);
    install(src, colon + 1, 0600);
  }
  if (!command) {
    if (mkdirs(SCRIPT_DIR, 0755) < 0) fail("cannot prepare the step: cannot create %s: %s", SCRIPT_DIR, strerror(errno));
    install("script", SCRIPT_PATH, 0755);
  }
  if (uid >= 0) {
    for (int i = 0; i < nviews; i++)
      if (nftw(views[i], chown_one, 32, FTW_PHYS | FTW_MOUNT) != 0)
        fail("cannot prepare the step: cannot give %s to the script's user: %s", views[i], strerror(errno));
  }
  mount_binds();
  if (readonly_host) make_host_readonly();
  if (terminated) { say("cancelled\n"); write_status(); return 0; }
  int exec_failed = 0;
  int ws = run_script(envp, &exec_failed);
  if (uid >= 0) {
    for (int i = 0; i < nviews; i++) {
      unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSYMFOLLOW | (tmpfs_size ? MS_NOSUID | MS_NODEV : 0);
      if (mount(NULL, views[i], NULL, flags, NULL) < 0) fail("cannot read the outputs safely: cannot stop following symlinks in %s: %s", views[i], strerror(errno));
    }
  }
  if (exec_failed) {
    say("exec %d %s\n", exec_failed, strerror(exec_failed));
  } else if (WIFSIGNALED(ws)) {
    say("signal %d\n", WTERMSIG(ws));
  } else {
    say("exit %d\n", WEXITSTATUS(ws));
  }
  if (terminated) say("cancelled\n");
  else if (!exec_failed && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) collect_outputs();
  else note_full_views();
  write_status();
  return 0;
}

/* A new network namespace starts with loopback down. */
static void loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) fail("cannot isolate the step (loopback: %s)", strerror(errno));
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) fail("cannot isolate the step (loopback up: %s)", strerror(errno));
  close(s);
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) < 0) fail("cannot set up the user namespace (%s): %s", path, strerror(errno));
  close(fd);
}

int main(int argc, char **argv, char **envp) {
  /* The resident launcher: it starts each step as this program again (launch-server.c). */
  if (argc == 2 && !strcmp(argv[1], "--serve")) return serve(argv[0]);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED() do { if (!v) usage("a flag is missing its value"); i++; } while (0)
    if (!strcmp(a, "--rundir")) { NEED(); rundir = v; }
    else if (!strcmp(a, "--pidns")) pidns = 1;
    else if (!strcmp(a, "--userns")) userns = 1;
    else if (!strcmp(a, "--readonly-host")) readonly_host = 1;
    else if (!strcmp(a, "--newnet")) newnet = 1;
    else if (!strcmp(a, "--netns")) { NEED(); netns_path = v; }
    else if (!strcmp(a, "--resolv")) { NEED(); resolv_path = v; }
    else if (!strcmp(a, "--nice")) { NEED(); nice_level = atoi(v); }
    else if (!strcmp(a, "--uid")) { NEED(); uid = atol(v); }
    else if (!strcmp(a, "--gid")) { NEED(); gid = atol(v); }
    else if (!strcmp(a, "--tmpfs-size")) { NEED(); tmpfs_size = strtoull(v, NULL, 10); }
    else if (!strcmp(a, "--limit")) { NEED(); limit = strtoull(v, NULL, 10); }
    else if (!strcmp(a, "--view")) { NEED(); if (nviews == MAX_ITEMS) usage("too many views"); views[nviews++] = v; }
    else if (!strcmp(a, "--file")) { NEED(); if (nfiles == MAX_ITEMS || !strchr(v, ':')) usage("bad --file"); files[nfiles++] = v; }
    else if (!strcmp(a, "--output")) { NEED(); if (noutputs == MAX_ITEMS) usage("too many outputs"); outputs[noutputs++] = v; }
    else if (!strcmp(a, "--bind") || !strcmp(a, "--bind-ro")) {
      if (i + 2 >= argc) usage("--bind needs a source and a destination");
      if (nbinds == MAX_ITEMS) usage("too many binds");
      binds[nbinds++] = (struct bind){ argv[i + 1], argv[i + 2], !strcmp(a, "--bind-ro"), -1 };
      i += 2;
    }
    else if (!strcmp(a, "--chdir")) { NEED(); workdir = v; }
    else if (!strcmp(a, "--")) { if (i + 1 >= argc) usage("-- needs a command"); command = argv + i + 1; break; }
    else usage("unknown flag");
  }
  if (!rundir || rundir[0] != '/') usage("--rundir must be an absolute path");
  /* The script is copied to /tmp/.ephemera: never into the host's /tmp, shared with other steps. */
  int private_tmp = 0;
  for (int i = 0; i < nviews; i++) private_tmp |= strcmp(views[i], "/tmp") == 0;
  if (!private_tmp) usage("a step needs a private /tmp (--view /tmp)");
  if (uid >= 0 && gid < 0) gid = uid;
  if (newnet && netns_path) usage("--newnet and --netns exclude each other");

  /* Dies with the runner; and a runner already gone leaves nothing to run for. */
  pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;
  if (nice_level) setpriority(PRIO_PROCESS, 0, nice_level);
  /* A stop now is handled by the step (below); this program only waits for it. */
  signal(SIGTERM, SIG_IGN);

  dirfd_run = open(rundir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd_run < 0) usage("cannot open the run directory");
  uid_t outer_uid = getuid();
  gid_t outer_gid = getgid();
  /* Joined first: inside a new user namespace this program could not join it any more. */
  if (netns_path) {
    int fd = open(netns_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) fail("cannot isolate the step (network namespace %s: %s)", netns_path, strerror(errno));
    close(fd);
  }
  int flags = CLONE_NEWNS | (pidns ? CLONE_NEWPID : 0) | (userns ? CLONE_NEWUSER : 0) | (newnet ? CLONE_NEWNET : 0);
  if (unshare(flags) < 0) fail("cannot isolate the step (unshare: %s)", strerror(errno));
  if (userns) {
    char map[64];
    int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) { if (write(fd, "deny", 4) < 0) { /* older kernels: no such file */ } close(fd); }
    snprintf(map, sizeof map, "0 %u 1", (unsigned)outer_uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1", (unsigned)outer_gid);
    write_file("/proc/self/gid_map", map);
  }
  if (newnet) loopback_up();
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) fail("cannot isolate the step (private mounts: %s)", strerror(errno));
  /* The run directory stays writable for the status (a mount of its own, kept out of the read-only remounts). */
  if (mount(rundir, rundir, NULL, MS_BIND, NULL) < 0) fail("cannot isolate the step (bind %s: %s)", rundir, strerror(errno));
  close(dirfd_run);
  dirfd_run = open(rundir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd_run < 0) fail("cannot open the run directory: %s", strerror(errno));

  pid_t child = fork();
  if (child < 0) fail("cannot start the step: %s", strerror(errno));
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    return step(envp);
  }
  int ws;
  while (waitpid(child, &ws, 0) < 0) if (errno != EINTR) return 1;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}
