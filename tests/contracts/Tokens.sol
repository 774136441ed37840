// SPDX-License-Identifier: MIT
// Minimal tokens for the indexer's tests and the demo's steady flow: just enough of
// ERC-20, ERC-721 and ERC-1155 to emit the standard events and answer the metadata
// and balance calls, plus a non-standard token (bytes32 symbol, no name, reverting
// decimals). Compiled with solc 0.8.28 (npm `solc`), see build.sh; the bytecode is
// checked in next to this file (Tokens.json).
pragma solidity 0.8.28;

contract Erc20 {
    string public name;
    string public symbol;
    uint8 public decimals;
    mapping(address => uint256) public balanceOf;
    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor(string memory n, string memory s, uint8 d) {
        name = n;
        symbol = s;
        decimals = d;
    }

    function mint(address to, uint256 value) external {
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}

/// Metadata the way some old tokens have it: `symbol` as bytes32, no `name`, and a
/// `decimals` that reverts.
contract OddToken {
    bytes32 public symbol = "ODD";
    mapping(address => uint256) public balanceOf;
    event Transfer(address indexed from, address indexed to, uint256 value);

    function decimals() external pure returns (uint8) {
        revert("no decimals");
    }

    function mint(address to, uint256 value) external {
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }
}

contract Erc721 {
    string public name = "Chainedge Kittens";
    string public symbol = "CEK";
    mapping(uint256 => address) public ownerOf;
    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);

    function mint(address to, uint256 id) external {
        require(ownerOf[id] == address(0), "minted");
        ownerOf[id] = to;
        emit Transfer(address(0), to, id);
    }

    function transferFrom(address from, address to, uint256 id) external {
        require(ownerOf[id] == from && from == msg.sender, "owner");
        ownerOf[id] = to;
        emit Transfer(from, to, id);
    }
}

contract Erc1155 {
    mapping(uint256 => mapping(address => uint256)) public balanceOf;
    event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
    event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values);

    function mint(address to, uint256 id, uint256 value) external {
        balanceOf[id][to] += value;
        emit TransferSingle(msg.sender, address(0), to, id, value);
    }

    function mintBatch(address to, uint256[] calldata ids, uint256[] calldata values) external {
        require(ids.length == values.length, "lengths");
        for (uint256 i = 0; i < ids.length; i++) {
            balanceOf[ids[i]][to] += values[i];
        }
        emit TransferBatch(msg.sender, address(0), to, ids, values);
    }

    function safeTransferFrom(address from, address to, uint256 id, uint256 value, bytes calldata) external {
        require(from == msg.sender && balanceOf[id][from] >= value, "balance");
        balanceOf[id][from] -= value;
        balanceOf[id][to] += value;
        emit TransferSingle(msg.sender, from, to, id, value);
    }
}
