import { commonConfig, natsAuth, redactUrl, redisAuth } from "./config.js";

describe("credentials from the environment", () => {
  it("reads one way of authenticating to NATS", () => {
    expect(natsAuth({})).toBeUndefined();
    expect(natsAuth({ NATS_USER: "u", NATS_PASSWORD: "p" })).toEqual({ kind: "user", user: "u", pass: "p" });
    expect(natsAuth({ NATS_TOKEN: "t" })).toEqual({ kind: "token", token: "t" });
    expect(natsAuth({ NATS_NKEY: "/run/seed" })).toEqual({ kind: "nkey", seedFile: "/run/seed" });
    expect(natsAuth({ NATS_CREDS: "/run/user.creds" })).toEqual({ kind: "creds", credsFile: "/run/user.creds" });
  });

  it("refuses half a user/password pair, and two ways at once, naming the variables", () => {
    expect(() => natsAuth({ NATS_USER: "u" })).toThrow("NATS_USER and NATS_PASSWORD go together");
    expect(() => natsAuth({ NATS_PASSWORD: "secret" })).toThrow("NATS_USER and NATS_PASSWORD go together");
    expect(() => natsAuth({ NATS_TOKEN: "t", NATS_CREDS: "/c" })).toThrow("not NATS_TOKEN and NATS_CREDS");
  });

  it("never puts a credential in an error", () => {
    for (const env of [{ NATS_PASSWORD: "s3cret" }, { NATS_TOKEN: "s3cret", NATS_USER: "u", NATS_PASSWORD: "s3cret" }, { REDIS_USERNAME: "u" }]) {
      try {
        natsAuth(env);
        redisAuth(env);
      } catch (err) {
        expect(String(err)).not.toContain("s3cret");
        continue;
      }
      throw new Error(`no error for ${Object.keys(env).join(", ")}`);
    }
  });

  it("reads a Redis ACL user and password", () => {
    expect(redisAuth({})).toBeUndefined();
    expect(redisAuth({ REDIS_PASSWORD: "p" })).toEqual({ password: "p" });
    expect(redisAuth({ REDIS_USERNAME: "u", REDIS_PASSWORD: "p" })).toEqual({ username: "u", password: "p" });
    expect(() => redisAuth({ REDIS_USERNAME: "u" })).toThrow("REDIS_PASSWORD is empty");
  });

  it("puts them in the common configuration", () => {
    expect(commonConfig({ NATS_USER: "u", NATS_PASSWORD: "p", REDIS_PASSWORD: "r" })).toMatchObject({
      natsAuth: { kind: "user", user: "u" }, redisAuth: { password: "r" },
    });
    expect(commonConfig({})).not.toHaveProperty("natsAuth");
  });
});

describe("redactUrl", () => {
  it("hides a user and password, and leaves other URLs alone", () => {
    expect(redactUrl("redis://app:s3cret@cache:6379/0")).toBe("redis://***:***@cache:6379/0");
    expect(redactUrl("nats://tok@nats:4222")).toBe("nats://***@nats:4222");
    expect(redactUrl("nats://127.0.0.1:4222")).toBe("nats://127.0.0.1:4222");
    expect(redactUrl("not a url //x:y@z")).toBe("not a url //***@z");
  });

  it("reads EPHEMERA_STREAM_REPLICAS, 1 by default, and refuses what JetStream would", () => {
    expect(commonConfig({}).streamReplicas).toBe(1);
    expect(commonConfig({ EPHEMERA_STREAM_REPLICAS: "3" }).streamReplicas).toBe(3);
    for (const bad of ["0", "6"]) expect(() => commonConfig({ EPHEMERA_STREAM_REPLICAS: bad })).toThrow(/EPHEMERA_STREAM_REPLICAS must be 1 to 5/);
    expect(() => commonConfig({ EPHEMERA_STREAM_REPLICAS: "three" })).toThrow(/EPHEMERA_STREAM_REPLICAS/);
  });
});
