// What the webhook counts: each review by what was done, and how long answering took.
import { Counter, Histogram, LATENCY_BUCKETS, type Registry } from "@ephemera/kit/metrics";
import type { ReviewAnswer } from "./review.js";

/** What was done, or `refused` (a 4xx: no review, not JSON, too large), or `error` (a 500). */
export type ReviewOutcome = ReviewAnswer["outcome"] | "refused" | "error";

export class WebhookMetrics {
  private readonly reviews: Counter<"outcome">;
  private readonly seconds: Histogram;

  constructor(registry: Registry) {
    this.reviews = new Counter({
      name: "ephemera_webhook_reviews_total", help: "AdmissionReviews answered, by what was done", labelNames: ["outcome"], registers: [registry],
    });
    this.seconds = new Histogram({
      name: "ephemera_webhook_review_duration_seconds", help: "From a review's arrival to its answer", buckets: LATENCY_BUCKETS, registers: [registry],
    });
  }

  answered(outcome: ReviewOutcome, startedAt: bigint): void {
    this.reviews.inc({ outcome });
    this.seconds.observe(Number(process.hrtime.bigint() - startedAt) / 1e9);
  }
}
