package basalt.interop;

/** A case's check did not hold; the message says which and why. */
public final class CaseFailed extends Exception {
    private static final long serialVersionUID = 1L;

    CaseFailed(String reason) {
        super(reason);
    }

    @Override
    public String toString() {
        return getMessage();
    }
}
