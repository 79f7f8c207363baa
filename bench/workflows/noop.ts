/**
 * The cheapest workflow the dev server can run (the ceiling scenario): no activity, no timer, one
 * workflow task. The sink tells the bench process it ran without adding anything to the history.
 */
import { proxySinks, type Sinks } from '@temporalio/workflow';

export interface CeilingSinks extends Sinks {
  ceiling: { completed(): void };
}

const { ceiling } = proxySinks<CeilingSinks>();

export async function benchNoop(): Promise<void> {
  ceiling.completed();
}
