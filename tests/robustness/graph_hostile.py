#!/usr/bin/env python3
"""Edge data and moved child graphs from a hostile client: edge data the driver's rules
refuse (an input port, reserved bytes, a programmatic edge from the default port or to a
node that is not a kernel, a port out of a memset), malformed dependencies and data lists,
are refused and leave the graph as it was; a move of a graph that is held, being moved
into what it holds, another session's, or of an unknown kind is refused; moves nest at
most 16 deep; a graph with memory nodes keeps the driver's rules (no clone, no node or edge
destroyed, one executable graph at a time); a moved graph's handle goes with its parent.

  graph_hostile.py --server BIN --opcodes codegen/opcodes.txt
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'integration'))
import run  # noqa: E402  (the integration harness: Server)

from wire import (INVALID_VALUE, NOT_SUPPORTED, SUCCESS, Client, Failure, expect,  # noqa: E402
                  read_opcodes, reply)

PORT_PROGRAMMATIC = 1
PROGRAMMATIC = 1 << 16  # the edge's type, in its data as it travels


def graph_hostile(server, opcodes):
    path = server.address[len('unix:'):]
    a, b = Client(path, opcodes), Client(path, opcodes)
    dev = a.call('cuMemAlloc_v2', [True, 4096])[1]
    memset = opcodes['cuMemsetD32Async']

    def result(op, body, c=a):
        return c.call(op, body)[0]

    g = reply(a, 'cuGraphCreate', [0])[1]
    first = reply(a, 'cuGraphAddNode', [g, [], memset, [dev, 1, 16, 0]])[1]
    second = reply(a, 'cuGraphAddNode', [g, [first], memset, [dev, 2, 16, 0]])[1]

    def edges():
        return reply(a, 'cuGraphGetEdges', [g])

    before = edges()
    expect('the graph has its one edge, default', before, [SUCCESS, [first], [second], []])
    for what, data in (('an input port', 1 << 8), ('reserved bytes', 1 << 24),
                       ('a type past programmatic', 2 << 16), ('a port past launch order', 3),
                       ('a programmatic edge from the default port', PROGRAMMATIC),
                       ('a port out of a memset', PORT_PROGRAMMATIC),
                       ('a programmatic edge between memsets', PROGRAMMATIC | PORT_PROGRAMMATIC),
                       ('data of 64 bits', (1 << 64) - 1)):
        expect('an edge with %s is refused' % what,
               result('cuGraphAddDependencies', [g, [second], [first], [data]]), INVALID_VALUE)
        expect('a node after an edge with %s is refused' % what,
               result('cuGraphAddNode', [g, [[first, data]], 0, []]), INVALID_VALUE)
    for what, deps in (('a dependency of one element', [[first]]),
                       ('a dependency of three elements', [[first, 0, 0]]),
                       ('a dependency whose data is no number', [[first, [1]]]),
                       ('a dependency of another graph', [[0x7777, 0]])):
        expect('%s is refused' % what, result('cuGraphAddNode', [g, deps, 0, []]), INVALID_VALUE)
    expect('a data list shorter than the edges is refused',
           result('cuGraphAddDependencies', [g, [second, first], [first, second], [0]]),
           INVALID_VALUE)
    expect('a data list that is no list is refused',
           result('cuGraphAddDependencies', [g, [second], [first], 0]), INVALID_VALUE)
    expect('an edge removed with other data is refused',
           result('cuGraphRemoveDependencies', [g, [first], [second], [2]]), INVALID_VALUE)
    expect('the graph is as it was', edges(), before)
    expect('a node after a default edge given as data is made',
           reply(a, 'cuGraphAddNode', [g, [[second, 0]], 0, []])[0], SUCCESS)
    expect('another session cannot read the edges',
           result('cuGraphGetEdges', [g], c=b), INVALID_VALUE)
    # a capture into the graph after dependencies with data
    stream = (1 << 62) + 9
    a.send_async('cuStreamCreate', [stream, 1])
    for what, data in (('an input port', 1 << 8),
                       ('a port out of a memset', PROGRAMMATIC | PORT_PROGRAMMATIC)):
        expect('a capture after a dependency with %s is refused' % what,
               result('cuStreamBeginCapture_v2', [stream, 0, g, [[second, data]]]),
               INVALID_VALUE)
    expect('so the stream does not capture',
           reply(a, 'cuStreamGetCaptureInfo_v3', [stream])[0], 401)  # ILLEGAL_STATE

    # moves
    def move(parent, child, how=1, c=a):
        return result('cuGraphAddChildGraphNode', [parent, [], child, how], c=c)

    kid = reply(a, 'cuGraphCreate', [0])[1]
    expect('a move of an unknown kind is refused', move(g, kid, 2), INVALID_VALUE)
    expect('a graph moved into itself is refused', move(kid, kid), INVALID_VALUE)
    theirs = reply(b, 'cuGraphCreate', [0])[1]
    expect('another session cannot move the graph', move(theirs, kid, c=b), INVALID_VALUE)
    node = reply(a, 'cuGraphAddChildGraphNode', [g, [], kid, 1])
    expect('a graph is moved into a node', node[0], SUCCESS)
    expect('the node gives the same graph back',
           reply(a, 'cuGraphChildGraphNodeGetGraph', [node[1]]), [SUCCESS, kid])
    expect('a moved graph is not moved again', move(reply(a, 'cuGraphCreate', [0])[1], kid),
           INVALID_VALUE)
    expect('nor copied into another node',
           result('cuGraphAddChildGraphNode', [reply(a, 'cuGraphCreate', [0])[1], [], kid]),
           INVALID_VALUE)
    expect('a graph is not moved into what it holds', move(kid, g), INVALID_VALUE)
    expect('a moved graph is not destroyed on its own', result('cuGraphDestroy', [kid]),
           INVALID_VALUE)
    expect('nor instantiated', result('cuGraphInstantiateWithFlags', [kid, 0]), INVALID_VALUE)
    expect('nor given memory nodes',
           result('cuGraphAddMemAllocNode', [kid, [], 1 << 20]), NOT_SUPPORTED)
    held = reply(a, 'cuGraphChildGraphNodeGetGraph', [node[1]])[1]
    inner, depth = reply(a, 'cuGraphCreate', [0])[1], 0
    while depth < 40:
        outer = reply(a, 'cuGraphCreate', [0])[1]
        if move(outer, inner) != SUCCESS:
            break
        inner, depth = outer, depth + 1
    expect('moved graphs nest 16 deep, no deeper', depth, 16)
    expect('the parent goes', result('cuGraphDestroy', [g]), SUCCESS)
    expect('and the moved graph\'s handle with it', result('cuGraphGetNodes', [held]),
           INVALID_VALUE)

    # a graph with memory nodes
    m = reply(a, 'cuGraphCreate', [0])[1]
    alloc = reply(a, 'cuGraphAddMemAllocNode', [m, [], 1 << 20])
    expect('an allocation node is made', alloc[0], SUCCESS)
    after = reply(a, 'cuGraphAddNode', [m, [alloc[1]], memset, [alloc[2], 3, 16, 0]])[1]
    expect('a graph with memory nodes is not cloned', result('cuGraphClone', [m]),
           NOT_SUPPORTED)
    expect('none of its nodes is destroyed', result('cuGraphDestroyNode', [after]),
           INVALID_VALUE)
    expect('none of its edges removed',
           result('cuGraphRemoveDependencies', [m, [alloc[1]], [after]]), INVALID_VALUE)
    ex = reply(a, 'cuGraphInstantiateWithFlags', [m, 0])
    expect('it instantiates', ex[0], SUCCESS)
    expect('once while that lives', result('cuGraphInstantiateWithFlags', [m, 0]),
           NOT_SUPPORTED)
    expect('and launches', result('cuGraphLaunch', [ex[1], 0]), SUCCESS)
    expect('its executable graph goes', result('cuGraphExecDestroy', [ex[1]]), SUCCESS)
    again = reply(a, 'cuGraphInstantiateWithFlags', [m, 0])
    expect('then it instantiates again', again[0], SUCCESS)
    holder = reply(a, 'cuGraphCreate', [0])[1]
    expect('it is moved into a node while that lives', move(holder, m), SUCCESS)
    expect('whose graph then does not instantiate',
           result('cuGraphInstantiateWithFlags', [holder, 0]), NOT_SUPPORTED)
    expect('until that executable graph goes',
           result('cuGraphExecDestroy', [again[1]]), SUCCESS)
    ex = reply(a, 'cuGraphInstantiateWithFlags', [holder, 0])
    expect('the holder instantiates', ex[0], SUCCESS)
    expect('and launches', result('cuGraphLaunch', [ex[1], 0]), SUCCESS)
    expect('its stream finishes', result('cuStreamSynchronize', [0]), SUCCESS)
    expect('the holder goes, its executable graph still there',
           result('cuGraphDestroy', [holder]), SUCCESS)
    expect('which launches still', result('cuGraphLaunch', [ex[1], 0]), SUCCESS)
    expect('the server still serves', result('cuStreamSynchronize', [0]), SUCCESS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--server', required=True)
    ap.add_argument('--opcodes', required=True)
    args = ap.parse_args()
    opcodes = read_opcodes(args.opcodes)
    return run.with_server('graph_hostile.py', args.server,
                           lambda server: graph_hostile(server, opcodes),
                           errors=(Failure, AssertionError, ConnectionError, OSError))


if __name__ == '__main__':
    sys.exit(main())
