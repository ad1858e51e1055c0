package dev.rms.client.producer;

/**
 * The producer's local transaction, run between the prepare and the confirm: it commits its own
 * database work (marking the barrier first) and returns a result, or throws to have the message
 * cancelled.
 *
 * @param <I> what was prepared ({@link MessageInfo} or {@link TransactionInfo})
 * @param <T> the result
 * @param <E> the exception the work may throw
 */
@FunctionalInterface
public interface LocalTransaction<I, T, E extends Exception> {
  T run(I prepared) throws E;
}
