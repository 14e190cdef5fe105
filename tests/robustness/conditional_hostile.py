#!/usr/bin/env python3
"""Conditional graph nodes and a capture's graph asked for by a hostile client: handles,
kinds, body counts and dependencies that are not the graph's are refused, and a second
node on a handle; another session's graph cannot be named (a handle is a number in its
graph); bodies cannot be destroyed on their own; a well-formed node still instantiates
(once while its executable graph lives, as the driver) and launches; a graph whose handle
no node has is not instantiated; a child graph node's graph takes no conditional nodes;
graphs held in graphs nest at most 16 deep.

  conditional_hostile.py --server BIN --opcodes codegen/opcodes.txt
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server)

from wire import (INVALID_VALUE, NOT_SUPPORTED, SUCCESS, Client, Failure, expect,  # noqa: E402
                  read_opcodes, reply)

ILLEGAL_STATE = 401
COND_IF, COND_WHILE, COND_SWITCH = 0, 1, 2
ASSIGN_DEFAULT = 1


def result(c, op, body):
    """A call's CUresult alone (some replies carry a 0 result after an error)."""
    return c.call(op, body)[0]


def conditional_hostile(server, opcodes):
    path = server.address[len('unix:'):]
    a, b = Client(path, opcodes), Client(path, opcodes)
    g = reply(a, 'cuGraphCreate', [0])[1]
    other = reply(a, 'cuGraphCreate', [0])[1]
    expect('a handle with unknown flags is refused',
           result(a, 'cuGraphConditionalHandleCreate', [g, 0, 2]), INVALID_VALUE)
    expect('a default past 32 bits is refused',
           result(a, 'cuGraphConditionalHandleCreate', [g, 1 << 32, 0]), INVALID_VALUE)
    expect('a handle of no graph is refused',
           result(a, 'cuGraphConditionalHandleCreate', [0x7777, 0, 0]), INVALID_VALUE)
    got = reply(a, 'cuGraphConditionalHandleCreate', [g, 1, ASSIGN_DEFAULT])
    expect('a handle of the graph is made', got[0], SUCCESS)
    h = got[1]
    # a graph's handles are numbered 1, 2, ...: another graph's second is not one of g's
    reply(a, 'cuGraphConditionalHandleCreate', [other, 0, 0])
    theirs = reply(a, 'cuGraphConditionalHandleCreate', [other, 0, 0])[1]

    def refused(what, body):
        expect(what, result(a, 'cuGraphAddNode_v2', body), INVALID_VALUE)

    refused('a handle of another graph', [g, [], theirs, COND_IF, 1])
    refused('a handle that was never made', [g, [], h + 1000, COND_IF, 1])
    refused('an IF node of three bodies', [g, [], h, COND_IF, 3])
    refused('a WHILE node of two bodies', [g, [], h, COND_WHILE, 2])
    refused('a node of no bodies', [g, [], h, COND_SWITCH, 0])
    refused('a SWITCH node of 1025 bodies', [g, [], h, COND_SWITCH, 1025])
    refused('a SWITCH node of 2^64-1 bodies', [g, [], h, COND_SWITCH, (1 << 64) - 1])
    refused('an unknown kind', [g, [], h, 9, 1])
    refused('a dependency that is no node', [g, [0x1234567], h, COND_IF, 1])
    refused('a message of three arguments', [g, [], h])
    refused('a graph that is not one', [0x7777, [], h, COND_IF, 1])

    got = reply(a, 'cuGraphAddNode_v2', [g, [], h, COND_SWITCH, 4])
    expect('a SWITCH node of four bodies is made', (got[0], len(got[2])), (SUCCESS, 4))
    node, bodies = got[1], got[2]
    refused('a second node on its handle', [g, [], h, COND_IF, 1])
    expect('its body cannot be destroyed on its own',
           result(a, 'cuGraphDestroy', [bodies[0]]), INVALID_VALUE)
    refused('a dependency in another graph', [other, [node], theirs, COND_IF, 1])
    holder = reply(a, 'cuGraphCreate', [0])[1]
    expect('a graph with conditional nodes is no child graph',
           result(a, 'cuGraphAddChildGraphNode', [holder, [], g]), NOT_SUPPORTED)

    # the other session, which has no graph yet (ids are per session), sees none of it
    expect('another session cannot make handles on the graph',
           result(b, 'cuGraphConditionalHandleCreate', [g, 0, 0]), INVALID_VALUE)
    expect('nor on a body of it',
           result(b, 'cuGraphConditionalHandleCreate', [bodies[1], 0, 0]), INVALID_VALUE)
    expect('nor add to a body of it',
           result(b, 'cuGraphAddNode_v2', [bodies[1], [], h, COND_IF, 1]), INVALID_VALUE)
    mine = reply(b, 'cuGraphCreate', [0])[1]
    expect('nor use its handle in a graph of its own that has none',
           result(b, 'cuGraphAddNode_v2', [mine, [], h, COND_IF, 1]), INVALID_VALUE)

    # captures: none under way
    expect('a capture\'s graph without a capture',
           result(a, 'cuStreamGetCaptureInfo_v3', [0]), ILLEGAL_STATE)
    expect('a capture\'s dependencies without a capture',
           result(a, 'cuStreamUpdateCaptureDependencies_v2', [0, [node], 1]), ILLEGAL_STATE)

    # a nested node on the top graph's handle in a body; then the graph runs
    loop = reply(a, 'cuGraphConditionalHandleCreate', [bodies[2], 0, ASSIGN_DEFAULT])
    expect('a handle made on a body', loop[0], SUCCESS)
    got = reply(a, 'cuGraphAddNode_v2', [bodies[2], [], loop[1], COND_WHILE, 1])
    expect('a WHILE node in the body (its value 0: it never runs)', got[0], SUCCESS)
    exec_ = reply(a, 'cuGraphInstantiateWithFlags', [g, 0])
    expect('the graph instantiates', exec_[0], SUCCESS)
    expect('once while that lives (as the driver)',
           result(a, 'cuGraphInstantiateWithFlags', [g, 0]), NOT_SUPPORTED)
    expect('and launches', result(a, 'cuGraphLaunch', [exec_[1], 0]), SUCCESS)
    expect('and its stream finishes', result(a, 'cuStreamSynchronize', [0]), SUCCESS)
    expect('destroying the node', result(a, 'cuGraphDestroyNode', [node]), SUCCESS)
    expect('takes its bodies\' handles with it',
           result(a, 'cuGraphConditionalHandleCreate', [bodies[3], 0, 0]), INVALID_VALUE)
    expect('the executable graph still launches',
           result(a, 'cuGraphLaunch', [exec_[1], 0]), SUCCESS)
    expect('the node\'s handle takes a new node',
           reply(a, 'cuGraphAddNode_v2', [g, [], h, COND_WHILE, 1])[0], SUCCESS)
    expect('the executable graph goes', result(a, 'cuGraphExecDestroy', [exec_[1]]), SUCCESS)
    expect('the graph, whose handles no node has now, is not instantiated',
           result(a, 'cuGraphInstantiateWithFlags', [g, 0]), INVALID_VALUE)
    expect('the graph goes', result(a, 'cuGraphDestroy', [g]), SUCCESS)
    # a child graph node's graph takes no conditional handle (its copy would not be the
    # parent's); graphs held in graphs are bounded in depth
    child, parent = reply(a, 'cuGraphCreate', [0])[1], reply(a, 'cuGraphCreate', [0])[1]
    held_node = reply(a, 'cuGraphAddChildGraphNode', [parent, [], child])[1]
    held = reply(a, 'cuGraphChildGraphNodeGetGraph', [held_node])
    expect('a child graph node gives its graph', held[0], SUCCESS)
    expect('which takes no conditional handle',
           result(a, 'cuGraphConditionalHandleCreate', [held[1], 0, 0]), NOT_SUPPORTED)
    expect('nor a conditional node',
           result(a, 'cuGraphAddNode_v2', [held[1], [], h, COND_IF, 1]), NOT_SUPPORTED)
    inner, depth = reply(a, 'cuGraphCreate', [0])[1], 0
    while depth < 40:
        outer = reply(a, 'cuGraphCreate', [0])[1]
        if result(a, 'cuGraphAddChildGraphNode', [outer, [], inner]) != SUCCESS:
            break
        inner, depth = outer, depth + 1
    expect('child graphs nest 16 deep, no deeper', depth, 16)
    expect('the server still serves', result(a, 'cuStreamSynchronize', [0]), SUCCESS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)
    return run.with_server('conditional_hostile.py', args.server,
                           lambda server: conditional_hostile(server, opcodes),
                           errors=(Failure, AssertionError, ConnectionError, OSError))


if __name__ == '__main__':
    sys.exit(main())
