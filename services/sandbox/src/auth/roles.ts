// The public API's roles, each allowing what the one before it does and more.
export const ROLES = ["viewer", "editor", "admin"] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (value: unknown): value is Role => ROLES.includes(value as Role);

export const roleAllows = (have: Role, need: Role): boolean => ROLES.indexOf(have) >= ROLES.indexOf(need);

/** Who a verified bearer token stands for. */
export interface Principal {
  /** The token's name in the tokens file, or the JWT's `sub`: recorded as the actor of what the call writes. */
  name: string;
  role: Role;
  via: "token" | "jwt";
}
