package dev.rms.client.checkback;

/**
 * The application's answer to a check-back: whether the local transaction of {@code request}
 * committed ({@link dev.rms.client.barrier.JdbcBarrier} answers this exactly). Throwing answers
 * {@link CheckStatus#UNKNOWN}, so RMS asks again later.
 *
 * @param <R> {@link CheckRequest} or {@link TransactionCheckRequest}
 */
@FunctionalInterface
public interface Resolver<R> {
  CheckStatus resolve(R request) throws Exception;
}
