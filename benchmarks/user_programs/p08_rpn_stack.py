import jax.numpy as jnp
from jax import lax


# token ids: 0 = pad/end, 1 = '+', 2 = '*', 3 = '-', 4 = 'dup', >= 10: push (tok - 10)
def f(tokens):
    stack = jnp.zeros(16)
    sp = 0
    for tok in tokens:
        if tok == 0:
            break
        elif tok == 1:
            stack = stack.at[sp - 2].set(stack[sp - 2] + stack[sp - 1])
            sp -= 1
        elif tok == 2:
            stack = stack.at[sp - 2].set(stack[sp - 2] * stack[sp - 1])
            sp -= 1
        elif tok == 3:
            stack = stack.at[sp - 2].set(stack[sp - 2] - stack[sp - 1])
            sp -= 1
        elif tok == 4:
            stack = stack.at[sp].set(stack[sp - 1])
            sp += 1
        else:
            stack = stack.at[sp].set(tok - 10.0)
            sp += 1
    return stack[sp - 1], sp


def f_lax(tokens):
    n = tokens.shape[0]

    def cond(s):
        i, _, _ = s
        return (i < n) & (tokens[jnp.minimum(i, n - 1)] != 0)

    def body(s):
        i, stack, sp = s
        tok = tokens[i]
        a, b = stack[sp - 2], stack[sp - 1]
        binop = jnp.where(tok == 1, a + b, jnp.where(tok == 2, a * b, a - b))
        is_bin = (tok >= 1) & (tok <= 3)
        push_val = jnp.where(tok == 4, b, tok - 10.0)
        idx = jnp.where(is_bin, sp - 2, sp)
        val = jnp.where(is_bin, binop, push_val)
        stack = stack.at[idx].set(val)
        sp = jnp.where(is_bin, sp - 1, sp + 1)
        return i + 1, stack, sp

    _, stack, sp = lax.while_loop(cond, body, (0, jnp.zeros(16), 0))
    return stack[sp - 1], sp


def make_args():
    # (3 4 +) dup * 2 - 5 * ...  repeated
    prog = [13, 14, 1, 4, 2, 12, 3, 15, 2, 11, 1] * 5 + [1] * 4
    prog = [13] * 4 + prog
    toks = jnp.array(prog + [0] * (96 - len(prog)), jnp.int32)
    return (toks,)
